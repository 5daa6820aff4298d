"""The G1 training model (published facts of docs/design.md §7) and the torch forward kinematics."""

import math

import mujoco
import numpy as np
import pytest
import torch

from duorl.envs import quat as Q
from duorl.envs.g1 import model as g1
from duorl.envs.kinematics import BodyKinematics

# docs/design.md §7: armature, kp, kd, effort per joint group
TABLE = {
    "left_elbow_joint": (0.00361, 14.25, 0.907, 25), "right_shoulder_pitch_joint": (0.00361, 14.25, 0.907, 25),
    "left_shoulder_roll_joint": (0.00361, 14.25, 0.907, 25), "right_shoulder_yaw_joint": (0.00361, 14.25, 0.907, 25),
    "left_wrist_roll_joint": (0.00361, 14.25, 0.907, 25),
    "left_hip_pitch_joint": (0.01018, 40.18, 2.558, 88), "right_hip_yaw_joint": (0.01018, 40.18, 2.558, 88),
    "waist_yaw_joint": (0.01018, 40.18, 2.558, 88),
    "right_hip_roll_joint": (0.02510, 99.10, 6.309, 139), "left_knee_joint": (0.02510, 99.10, 6.309, 139),
    "left_ankle_pitch_joint": (0.00722, 28.50, 1.814, 50), "right_ankle_roll_joint": (0.00722, 28.50, 1.814, 50),
    "waist_pitch_joint": (0.00722, 28.50, 1.814, 50), "waist_roll_joint": (0.00722, 28.50, 1.814, 50),
    "right_wrist_pitch_joint": (0.00425, 16.78, 1.068, 5), "left_wrist_yaw_joint": (0.00425, 16.78, 1.068, 5),
}


@pytest.fixture(scope="module")
def model():
    return g1.load()


def test_structure(model):
    assert (model.nq, model.nv, model.nu) == (36, 35, 29)
    names = [model.joint(j).name for j in range(1, model.njnt)]
    assert tuple(names) == g1.JOINT_NAMES
    assert [model.actuator(a).name for a in range(model.nu)] == names  # ctrl i drives joint i
    assert model.nmesh == 0 and model.nsensor == 0
    assert not (model.geom_type == mujoco.mjtGeom.mjGEOM_MESH).any()
    floor = model.geom("floor")
    assert floor.type == mujoco.mjtGeom.mjGEOM_PLANE and floor.bodyid == 0
    assert model.opt.timestep == pytest.approx(0.005)
    assert model.opt.integrator == mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    assert model.opt.cone == mujoco.mjtCone.mjCONE_PYRAMIDAL


def test_collisions_floor_only_and_feet(model):
    robot = [g for g in range(model.ngeom) if model.geom_bodyid[g] > 0]
    assert robot and all(model.geom(g).name.endswith("_collision") for g in robot)
    assert (model.geom_contype[robot] == 0).all() and (model.geom_conaffinity[robot] == 1).all()
    feet = [g for g in robot if g1.FOOT_GEOM.match(model.geom(g).name)]
    assert len(feet) == 14
    assert (model.geom_condim[feet] == 3).all() and (model.geom_priority[feet] == 1).all()
    assert np.allclose(model.geom_friction[feet, 0], 0.6)
    others = sorted(set(robot) - set(feet))
    assert (model.geom_condim[others] == 1).all()


def test_actuation_matches_the_published_table(model):
    for joint, (arm, kp, kd, effort) in TABLE.items():
        a = model.actuator(joint)
        assert model.dof_armature[model.joint(joint).dofadr[0]] == pytest.approx(arm, rel=2e-3)
        assert a.gainprm[0] == pytest.approx(kp, abs=0.006) and a.biasprm[1] == pytest.approx(-a.gainprm[0])
        assert -a.biasprm[2] == pytest.approx(kd, abs=6e-4)
        assert tuple(a.forcerange) == (-effort, effort) and a.forcelimited and not a.ctrllimited
        # kp = a w^2 and kd = 2 * 2 * a * w at w = 2 pi 10 Hz
        w = 2 * math.pi * 10
        assert a.gainprm[0] == pytest.approx(model.dof_armature[model.joint(joint).dofadr[0]] * w * w)
    scale = g1.action_scale()
    for i, joint in enumerate(g1.JOINT_NAMES):
        a = model.actuator(joint)
        assert scale[i] == pytest.approx(0.25 * a.forcerange[1] / a.gainprm[0])


def test_standing_pose(model):
    q = dict(zip(g1.JOINT_NAMES, g1.default_joint_pos()))
    for side in ("left", "right"):
        assert q[f"{side}_hip_pitch_joint"] == -0.312 and q[f"{side}_knee_joint"] == 0.669
        assert q[f"{side}_ankle_pitch_joint"] == -0.363 and q[f"{side}_elbow_joint"] == 0.6
        assert q[f"{side}_shoulder_pitch_joint"] == 0.2
    assert q["left_shoulder_roll_joint"] == 0.2 and q["right_shoulder_roll_joint"] == -0.2
    assert sum(v != 0 for v in q.values()) == 12
    d = mujoco.MjData(model)
    d.qpos[:] = g1.default_qpos()
    mujoco.mj_forward(model, d)
    assert d.qpos[2] == 0.76
    feet = [model.site(s).id for s in g1.FEET_SITES]
    assert np.all(np.abs(d.site_xpos[feet, 2]) < 0.005)  # the soles touch the floor
    assert d.ncon == 0 or d.contact.dist.min() > -0.001


def random_states(model, n, seed=0):
    rng = np.random.default_rng(seed)
    qpos = np.tile(g1.default_qpos(), (n, 1))
    qpos[:, :3] += rng.normal(size=(n, 3)) * 0.3
    qq = rng.normal(size=(n, 4))
    qpos[:, 3:7] = qq / np.linalg.norm(qq, axis=1, keepdims=True)
    qpos[:, 7:] += rng.normal(size=(n, 29))
    return qpos, rng.normal(size=(n, model.nv)) * 2.0


def test_kinematics_match_mujoco(model):
    """Torch FK of every body (in a shuffled order) equals MuJoCo's xpos, xquat and
    mj_objectVelocity (frame origin, world frame) on random states, float64 and float32."""
    bodies = list(np.random.default_rng(1).permutation(np.arange(1, model.nbody)))
    qpos, qvel = random_states(model, 12)
    d = mujoco.MjData(model)
    want = {k: np.zeros((12, len(bodies), n)) for k, n in (("pos", 3), ("quat", 4), ("lin", 3), ("ang", 3))}
    v6 = np.zeros(6)
    for i in range(12):
        d.qpos[:], d.qvel[:] = qpos[i], qvel[i]
        mujoco.mj_forward(model, d)
        for k, b in enumerate(bodies):
            mujoco.mj_objectVelocity(model, d, mujoco.mjtObj.mjOBJ_XBODY, b, v6, 0)
            want["pos"][i, k], want["quat"][i, k] = d.xpos[b], d.xquat[b]
            want["ang"][i, k], want["lin"][i, k] = v6[:3], v6[3:]
    for dtype, tol in ((torch.float64, 1e-10), (torch.float32, 2e-4)):
        f = BodyKinematics(model, bodies, "cpu", dtype)(torch.tensor(qpos), torch.tensor(qvel))
        torch.testing.assert_close(f.pos, torch.tensor(want["pos"], dtype=dtype), atol=tol, rtol=0)
        # q and -q are one rotation
        angle = Q.angle_between(f.quat, torch.tensor(want["quat"], dtype=dtype))
        assert angle.max() < 10 * tol
        torch.testing.assert_close(f.lin_vel, torch.tensor(want["lin"], dtype=dtype), atol=10 * tol, rtol=0)
        torch.testing.assert_close(f.ang_vel, torch.tensor(want["ang"], dtype=dtype), atol=10 * tol, rtol=0)
    pos_only = BodyKinematics(model, bodies[:3], "cpu", torch.float64)(torch.tensor(qpos))
    assert pos_only.lin_vel is None and torch.allclose(pos_only.pos, torch.tensor(want["pos"][:, :3]))


def test_kinematics_near_half_turns(model):
    """Orientations near a rotation of pi (where naive matrix->quaternion formulas break)."""
    qpos = np.tile(g1.default_qpos(), (3, 1))
    axis = np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0], [1.0, 0.0, 1.0]]) / math.sqrt(2)
    qpos[:, 3:7] = np.concatenate((np.full((3, 1), 1e-7), axis), axis=1)
    qpos[:, 3:7] /= np.linalg.norm(qpos[:, 3:7], axis=1, keepdims=True)
    f = BodyKinematics(model, [1, 5], "cpu", torch.float64)(torch.tensor(qpos))
    d = mujoco.MjData(model)
    for i in range(3):
        d.qpos[:] = qpos[i]
        mujoco.mj_kinematics(model, d)
        assert Q.angle_between(f.quat[i], torch.tensor(d.xquat[[1, 5]])).max() < 1e-6


def test_quat_helpers():
    g = torch.Generator().manual_seed(0)
    q = Q.normalize(torch.randn(64, 4, generator=g, dtype=torch.float64))
    v = torch.randn(64, 3, generator=g, dtype=torch.float64)
    R = Q.to_matrix(q)
    torch.testing.assert_close(Q.rotate(q, v), (R @ v.unsqueeze(-1)).squeeze(-1))
    torch.testing.assert_close(Q.rotate_inv(q, Q.rotate(q, v)), v)
    torch.testing.assert_close(Q.to_matrix(Q.mul(q, q.flip(0))), R @ R.flip(0))
    assert Q.angle_between(q, -q).max() < 1e-6
    z = Q.from_axis_angle(torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64).expand(64, 3), torch.full((64,), 0.7, dtype=torch.float64))
    torch.testing.assert_close(Q.yaw(z), torch.full((64,), 0.7, dtype=torch.float64))
    torch.testing.assert_close(Q.angle_between(Q.yaw_quat(Q.mul(z, q)), Q.mul(z, Q.yaw_quat(q))), torch.zeros(64, dtype=torch.float64), atol=1e-6, rtol=0)


def test_visual_model_for_rendering_has_the_same_dynamics(model):
    from duorl.envs.g1.assets import resolve_g1_xml

    xml = resolve_g1_xml(None)
    if not (xml.parent / "assets").is_dir():
        pytest.skip(f"no meshes next to {xml} (`duorl assets g1` without --no-meshes extracts them)")
    vis = g1.build_model(xml, visuals=True)
    assert vis.nmesh > 0 and vis.ngeom > model.ngeom
    np.testing.assert_allclose(vis.body_mass, model.body_mass)
    np.testing.assert_allclose(vis.body_inertia, model.body_inertia)
    assert vis.nu == model.nu and vis.nq == model.nq
