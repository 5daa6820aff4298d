"""The synthetic G1 clip is physically sensible, and the .npz clip format round-trips."""

import math

import mujoco
import numpy as np
import pytest

from duorl.cli import main as cli
from duorl.envs.g1 import model as g1
from duorl.envs.motion.clip import ARRAYS, load_clip, resample, save_clip
from duorl.envs.motion.synth import synthesize


@pytest.fixture(scope="module")
def model():
    return g1.load()


@pytest.fixture(scope="module")
def clip(model):
    return synthesize(model)


def test_shape_and_start(clip, model):
    assert clip.fps == 50.0 and clip.num_frames == 501 and clip.duration == pytest.approx(10.0)
    assert clip.joint_pos.shape == (501, 29) and clip.body_pos_w.shape == (501, model.nbody - 1, 3)
    assert clip.body_names[0] == "pelvis" and len(clip.body_names) == model.nbody - 1
    np.testing.assert_allclose(clip.joint_pos[0], g1.default_joint_pos(), atol=1e-9)
    np.testing.assert_allclose(clip.body_pos_w[0, 0], [0.0, 0.0, g1.ROOT_HEIGHT], atol=1e-9)
    assert np.abs(clip.joint_vel[0]).max() == 0 and np.abs(clip.body_lin_vel_w[0]).max() < 1e-9
    assert np.ptp(clip.joint_pos, axis=0).max() > 0.3  # it does move


def lowest_points(model, clip):
    """Per frame: the lowest point of every robot geom (capsules and spheres)."""
    d = mujoco.MjData(model)
    geoms = [g for g in range(model.ngeom) if model.geom_bodyid[g] > 0]
    low = np.zeros((clip.num_frames, len(geoms)))
    for k in range(clip.num_frames):
        d.qpos[0:3], d.qpos[3:7], d.qpos[7:] = clip.body_pos_w[k, 0], clip.body_quat_w[k, 0], clip.joint_pos[k]
        mujoco.mj_kinematics(model, d)
        for i, g in enumerate(geoms):
            half = model.geom_size[g, 1] if model.geom_type[g] == mujoco.mjtGeom.mjGEOM_CAPSULE else 0.0
            axis_z = d.geom_xmat[g].reshape(3, 3)[2, 2]
            low[k, i] = d.geom_xpos[g, 2] - half * abs(axis_z) - model.geom_size[g, 0]
    return low, geoms


def test_feet_on_the_ground_and_nothing_below_it(model, clip):
    low, geoms = lowest_points(model, clip)
    assert low.min() > -0.01  # no geom more than 1 cm below the floor
    feet = [i for i, g in enumerate(geoms) if g1.FOOT_GEOM.match(model.geom(g).name)]
    assert low[:, feet].min() > -0.001 and low[:, feet].min(axis=1).max() < 0.01  # planted, flat
    for side in g1.FEET_BODIES:
        b = clip.body_names.index(side)
        assert np.ptp(clip.body_pos_w[:, b], axis=0).max() < 1e-6  # the feet never slide
        assert np.abs(clip.body_lin_vel_w[:, b]).max() < 1e-3


def test_joint_limits_and_reach(model, clip):
    lo, hi = model.jnt_range[1:, 0], model.jnt_range[1:, 1]
    mid, half = (lo + hi) / 2, (hi - lo) / 2 * 0.9
    assert (clip.joint_pos >= mid - half).all() and (clip.joint_pos <= mid + half).all()  # soft limits
    # every target is within the policy's reach: |q - q_default| <= action scale
    assert (np.abs(clip.joint_pos - g1.default_joint_pos()) <= g1.action_scale()).all()


def test_smooth(clip):
    dt = 1.0 / clip.fps
    acc = np.diff(clip.joint_vel, axis=0) / dt
    assert np.abs(np.diff(clip.joint_pos, axis=0)).max() < 0.05  # rad per frame
    assert np.abs(acc[1:-1]).max() < 15.0  # rad/s^2
    assert np.abs(np.diff(acc[1:-1], axis=0) / dt).max() < 150.0  # rad/s^3: no kinks
    assert np.abs(clip.body_lin_vel_w).max() < 1.0 and np.abs(clip.body_ang_vel_w).max() < 4.0


def test_velocities_consistent_with_positions(clip):
    c = clip.fps / 2.0
    fd_pos = (clip.body_pos_w[2:] - clip.body_pos_w[:-2]) * c
    assert np.abs(fd_pos - clip.body_lin_vel_w[1:-1]).max() < 0.005
    fd_joint = (clip.joint_pos[2:] - clip.joint_pos[:-2]) * c
    assert np.abs(fd_joint - clip.joint_vel[1:-1]).max() < 1e-9
    # angular velocity: the rotation from frame k-1 to k+1, as a world-frame rate
    q0, q1 = clip.body_quat_w[:-2], clip.body_quat_w[2:]
    err = []
    for a, b, w in zip(q0.reshape(-1, 4), q1.reshape(-1, 4), clip.body_ang_vel_w[1:-1].reshape(-1, 3)):
        rel = np.zeros(4)
        mujoco.mju_mulQuat(rel, b, np.array([a[0], -a[1], -a[2], -a[3]]))  # b a^-1: world frame
        v = np.zeros(3)
        mujoco.mju_quat2Vel(v, rel, 2.0 / clip.fps)
        err.append(np.abs(v - w).max())
    assert max(err) < 0.01


def test_centre_of_mass_over_the_feet(model, clip):
    d = mujoco.MjData(model)
    feet = [model.body(b).id for b in g1.FEET_BODIES]
    for k in range(0, clip.num_frames, 5):
        d.qpos[0:3], d.qpos[3:7], d.qpos[7:] = clip.body_pos_w[k, 0], clip.body_quat_w[k, 0], clip.joint_pos[k]
        mujoco.mj_kinematics(model, d)
        mujoco.mj_comPos(model, d)
        com = d.subtree_com[1]
        ankle = d.xpos[feet]
        # the foot capsules span x in [-0.054, 0.132] from the ankle: keep a 2 cm margin inside
        assert ankle[:, 0].max() - 0.034 < com[0] < ankle[:, 0].min() + 0.112
        assert ankle[:, 1].min() + 0.02 < com[1] < ankle[:, 1].max() - 0.02


def test_save_load_round_trip(clip, tmp_path):
    path = tmp_path / "clip.npz"
    save_clip(path, clip)
    with np.load(path) as raw:
        assert set(raw.files) == {"fps", *ARRAYS, "body_names", "joint_names"}
        assert raw["fps"].shape == (1,) and raw["body_quat_w"].dtype == np.float32
    back = load_clip(path)
    assert back.fps == clip.fps and back.body_names == clip.body_names and back.joint_names == g1.JOINT_NAMES
    for k in ARRAYS:
        np.testing.assert_allclose(getattr(back, k), getattr(clip, k), atol=1e-5)


def test_load_rejects_bad_files(tmp_path, clip):
    np.savez(tmp_path / "x.npz", fps=50, joint_pos=np.zeros((3, 29)))
    with pytest.raises(ValueError, match="missing"):
        load_clip(tmp_path / "x.npz")
    arrays = {k: getattr(clip, k) for k in ARRAYS}
    arrays["joint_vel"] = arrays["joint_vel"][:-1]
    np.savez(tmp_path / "y.npz", fps=50, **arrays)
    with pytest.raises(ValueError, match="joint_vel"):
        load_clip(tmp_path / "y.npz")


def test_resample(clip):
    r = resample(clip, 30.0)
    assert r.fps == 30.0 and r.num_frames == 301
    k = 150  # t = 5 s = frame 250 of the 50 fps clip
    np.testing.assert_allclose(r.joint_pos[k], clip.joint_pos[250], atol=1e-12)
    mid = resample(clip, 100.0)  # halfway between frames: close to the average
    np.testing.assert_allclose(mid.body_pos_w[1], (clip.body_pos_w[0] + clip.body_pos_w[1]) / 2, atol=1e-12)
    assert np.allclose(np.linalg.norm(mid.body_quat_w, axis=-1), 1.0)
    assert resample(clip, 50.0) is clip


def test_cli_writes_a_loadable_clip(tmp_path, capsys):
    out = tmp_path / "sub" / "synth.npz"
    assert cli.main(["motion", "synth", str(out), "--seconds", "2", "--fps", "25"]) == 0
    assert "51 frames" in capsys.readouterr().out
    c = load_clip(out)
    assert c.fps == 25.0 and c.num_frames == 51 and math.isclose(c.duration, 2.0)
    assert cli.main(["motion", "synth", str(out), "--seconds", "0"]) == 2
