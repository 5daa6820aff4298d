"""g1_motion_tracking on the mujoco backend: shapes, finite outputs, clip timing, terminations,
and that following the reference exactly scores the maximum of every tracking term."""

import numpy as np
import pytest
import torch

from duorl.config.errors import ConfigError
from duorl.config.schema import SimConfig
from duorl.envs.task_sources import task_config
from duorl.envs import quat as Q
from duorl.envs.g1 import model as g1
from duorl.envs.g1.assets import resolve_g1_xml
from duorl.envs.motion.clip import load_clip, resample, save_clip
from duorl.envs.registry import env_spec, make_task, make_vec_env
from duorl.envs.tasks.g1_tracking import ROOT, TRACKED_BODIES, WEIGHTS, G1MotionTracking, default_clip

from .g1_util import cpu_env

N = 4
TRACKING_TERMS = ("anchor_pos", "anchor_ori", "body_pos", "body_ori", "body_lin_vel", "body_ang_vel")


def test_spec():
    spec = env_spec(task_config("g1_motion_tracking"))
    assert (spec.actor_obs_dim, spec.critic_obs_dim, spec.action_dim) == (160, 286, 29)
    assert spec.control_dt == pytest.approx(0.02) and spec.max_episode_steps == 500
    assert len(TRACKED_BODIES) == 14 and TRACKED_BODIES[7] == "torso_link"
    assert set(WEIGHTS) == {*TRACKING_TERMS, "action_rate", "joint_limit"}


def test_missing_motion_file_is_a_config_error():
    with pytest.raises(ConfigError, match="task.motion_file=/nope.npz"):
        make_task(task_config("g1_motion_tracking", motion_file="/nope.npz"))


def test_builds_and_steps_with_finite_outputs():
    env = make_vec_env(task_config("g1_motion_tracking", max_episode_steps=30), SimConfig(name="mujoco", nthread=1), N, "cpu", 1)
    obs = env.reset()
    assert obs["actor"].shape == (N, 160) and obs["critic"].shape == (N, 286)
    g = torch.Generator().manual_seed(0)
    for _ in range(35):
        obs, r, te, tr, info = env.step(torch.rand(N, 29, generator=g) * 2 - 1)
        for t in (obs["actor"], obs["critic"], r, info["final_obs"]["critic"]):
            assert torch.isfinite(t).all()
        assert int(info["nan_resets"]) == 0
    env.close()


def put_robot_on_clip(env, k: torch.Tensor) -> None:
    """Write the clip's state at frames k [N] into the simulation and the task's clock."""
    task, sim = env.task, env.backend
    quat = task.ref_quat[k, ROOT]
    qpos = torch.cat((task.ref_pos[k, ROOT], quat, task.ref_joint_pos[k]), dim=1)
    qvel = torch.cat((task.ref_lin_vel[k, ROOT], Q.rotate_inv(quat, task.ref_ang_vel[k, ROOT]), task.ref_joint_vel[k]), dim=1)
    sim.reset_envs(torch.ones(env.num_envs, dtype=torch.bool), qpos, qvel)
    task.frame.copy_(k)


def test_following_the_reference_scores_the_maximum():
    env = cpu_env(G1MotionTracking(randomize=False, reset_noise=False), 6, seed=0)
    env.reset()
    task = env.task
    k = torch.tensor([0, 37, 120, 250, 333, task.clip_frames - 1])
    put_robot_on_clip(env, k)
    terms = task.reward_terms(env.backend)
    for name in TRACKING_TERMS:
        torch.testing.assert_close(terms[name], torch.ones(6), atol=2e-5, rtol=0, msg=name)
    assert (terms["joint_limit"] == 0).all()  # the clip stays inside the soft limits
    assert not task.terminated(env.backend).any()
    # every kernel is exp(-err): 1 is its maximum; any deviation scores less
    qpos = env.backend.qpos.clone()
    qpos[:, 0] += 0.1
    qpos[:, 8:] += 0.1
    env.backend.reset_envs(torch.ones(6, dtype=torch.bool), qpos, env.backend.qvel.clone())
    worse = task.reward_terms(env.backend)
    for name in ("anchor_pos", "body_pos", "body_ori"):
        assert (worse[name] < 0.999).all(), name


def test_reset_starts_on_the_clip_at_random_frames():
    env = cpu_env(G1MotionTracking(randomize=False, reset_noise=False), 64, seed=3)
    env.reset()
    task = env.task
    f = task.frame
    assert f.min() >= 0 and f.max() <= task.clip_frames - 2 and len(set(f.tolist())) > 40
    fk = task._fk(env.backend.qpos.float(), env.backend.qvel.float())
    torch.testing.assert_close(fk.pos, task.ref_pos[f], atol=2e-5, rtol=0)
    torch.testing.assert_close(fk.lin_vel, task.ref_lin_vel[f], atol=2e-4, rtol=0)
    # with the default noise the start is near, not on, the clip
    noisy = cpu_env(G1MotionTracking(randomize=False), 64, seed=3)
    noisy.reset()
    d = (noisy.task._fk(noisy.backend.qpos.float()).pos - task.ref_pos[noisy.task.frame])[:, ROOT]
    assert 0 < d.abs().max() <= 0.05 + 1e-6


def test_observation_targets_the_next_frame():
    env = cpu_env(G1MotionTracking(randomize=False, reset_noise=False), 3, seed=0)
    env.reset()
    task = env.task
    put_robot_on_clip(env, torch.tensor([10, 200, 400]))
    obs = task.observe(env.backend)
    nxt = task.frame + 1
    torch.testing.assert_close(obs["actor"][:, :29], task.ref_joint_pos[nxt])
    torch.testing.assert_close(obs["actor"][:, 29:58], task.ref_joint_vel[nxt])
    step = Q.rotate_inv(task.ref_quat[task.frame, 7], task.ref_pos[nxt, 7] - task.ref_pos[task.frame, 7])
    torch.testing.assert_close(obs["actor"][:, 58:61], step, atol=1e-5, rtol=0)
    torch.testing.assert_close(obs["critic"][:, :67], obs["actor"][:, :67])
    env.step(torch.zeros(3, 29))
    assert task.frame.tolist() == [11, 201, 401]  # the action aims at the frame the obs showed


def test_clip_end_truncates_and_straying_terminates():
    env = cpu_env(G1MotionTracking(randomize=False, reset_noise=False), 3, seed=0)
    env.reset()
    task = env.task
    put_robot_on_clip(env, torch.tensor([task.clip_frames - 2, 100, 100]))
    qpos = env.backend.qpos.clone()
    qpos[2, 2] += 0.5  # env 2 floats 0.5 m above the clip
    env.backend.reset_envs(torch.tensor([False, False, True]), qpos, env.backend.qvel.clone())
    _, _, te, tr, info = env.step(torch.zeros(3, 29))
    assert tr.tolist() == [True, False, False] and te.tolist() == [False, False, True]
    assert info["episode_length"][0] == 1
    # the diagnostics say how each episode ended (per env: end_clip, end_deviation)
    assert info["metrics"][:, 2:].tolist() == [[1.0, 0.0], [0.0, 0.0], [0.0, 1.0]]


def test_tracking_errors_are_zero_on_the_clip_and_measured_off_it():
    env = cpu_env(G1MotionTracking(randomize=False, reset_noise=False), 2, seed=0)
    env.reset()
    task = env.task
    assert task.spec.metric_names == ("body_pos_error", "anchor_pos_error", "end_clip", "end_deviation")
    put_robot_on_clip(env, torch.tensor([100, 300]))
    m = task.metrics(env.backend)
    assert m[:, :2].abs().max() < 1e-5 and (m[:, 2:] == 0).all()
    qpos = env.backend.qpos.clone()
    qpos[1, 2] += 0.1  # env 1 10 cm above the clip: the anchor is off by 0.1, re-anchored bodies by less
    env.backend.reset_envs(torch.tensor([False, True]), qpos, env.backend.qvel.clone())
    m = task.metrics(env.backend)
    assert m[1, 1] == pytest.approx(0.1, abs=1e-5) and 0.0 < m[1, 0] <= 0.1 + 1e-5 and m[0, 1] < 1e-5


def test_a_retargeted_clip_file_loads(tmp_path):
    """A clip in the common format without body_names (every model body but the world, model
    order) at another frame rate, and one with named bodies in another order, give the same
    references as the clip they came from."""
    src = default_clip(resolve_g1_xml(None))
    plain = resample(src, 30.0)
    plain = type(plain)(**{**plain.__dict__, "body_names": None})
    save_clip(tmp_path / "plain.npz", plain)
    perm = np.random.default_rng(0).permutation(src.body_pos_w.shape[1])
    named = type(src)(**{**src.__dict__, "body_names": tuple(src.body_names[i] for i in perm),
                         **{k: getattr(src, k)[:, perm] for k in ("body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w")}})
    save_clip(tmp_path / "named.npz", named)
    refs = {}
    for name in ("plain", "named"):
        task = G1MotionTracking(motion_file=str(tmp_path / f"{name}.npz"), randomize=False)
        task.bind(2, torch.device("cpu"))
        refs[name] = task
    base = G1MotionTracking(randomize=False)
    base.bind(2, torch.device("cpu"))
    torch.testing.assert_close(refs["named"].ref_pos, base.ref_pos, atol=1e-5, rtol=0)
    torch.testing.assert_close(refs["named"].ref_quat, base.ref_quat, atol=1e-5, rtol=0)
    # 30 fps -> 50 fps: 10 s either way; interpolation error of a smooth clip is small
    assert refs["plain"].clip_frames == base.clip_frames
    torch.testing.assert_close(refs["plain"].ref_pos, base.ref_pos, atol=2e-3, rtol=0)
    torch.testing.assert_close(refs["plain"].ref_joint_pos, base.ref_joint_pos, atol=5e-3, rtol=0)
    assert load_clip(tmp_path / "plain.npz").body_names is None


def test_state_dict_round_trip():
    a, b = cpu_env(G1MotionTracking(), N, seed=5), cpu_env(G1MotionTracking(), N, seed=5)
    a.reset(), b.reset()
    for _ in range(2):
        a.step(torch.full((N, 29), 0.1))
        b.step(torch.full((N, 29), -0.3))
    b.load_state_dict(a.state_dict())
    for _ in range(3):
        oa, ra, *_ = a.step(torch.full((N, 29), -0.2))
        ob, rb, *_ = b.step(torch.full((N, 29), -0.2))
        assert torch.equal(oa["critic"], ob["critic"]) and torch.equal(ra, rb)
    assert torch.equal(a.task.frame, b.task.frame)


@pytest.fixture(scope="module")
def limit_clip_file(tmp_path_factory):
    """A clip that drives joints to their hard limits, as retargeters do (waist pitch, ankle roll,
    a shoulder), written in holosoma's layout: loaded through the format reader and the checks like
    any real clip."""
    from duorl.envs.motion.fk import ClipKinematics
    from duorl.envs.motion.synth import synthesize
    from duorl.envs.motion.trajectory import Trajectory

    from .motion_files import canonical_arrays, write_holosoma

    model = g1.load()
    src = synthesize(model, seconds=2.0, fps=50.0)
    q = src.joint_pos.copy()
    lo, hi = model.jnt_range[1:, 0], model.jnt_range[1:, 1]
    s = np.sin(np.linspace(0, np.pi, len(q))) ** 2  # 0 -> 1 (frame 50) -> 0
    for name, end in (("waist_pitch_joint", hi), ("right_ankle_roll_joint", lo), ("left_shoulder_roll_joint", hi)):
        j = g1.JOINT_NAMES.index(name)
        q[:, j] += s * (end[j] - q[:, j])
    clip = ClipKinematics(model).build(Trajectory(50.0, src.body_pos_w[:, 0], src.body_quat_w[:, 0], q))
    return write_holosoma(tmp_path_factory.mktemp("limits") / "limits.npz", canonical_arrays(clip))


def test_a_clip_at_the_joint_limits_scores_the_maximum_with_zero_penalties(limit_clip_file):
    task = G1MotionTracking(motion_file=str(limit_clip_file), randomize=False, reset_noise=False)
    env = cpu_env(task, 5, seed=0)
    env.reset()
    k = torch.tensor([0, 30, 50, 70, task.clip_frames - 1])  # frame 50: every chosen joint at its limit
    put_robot_on_clip(env, k)
    terms = task.reward_terms(env.backend)
    for name in TRACKING_TERMS:
        torch.testing.assert_close(terms[name], torch.ones(5), atol=2e-5, rtol=0, msg=name)
    assert (terms["joint_limit"] == 0).all() and (terms["action_rate"] == 0).all()
    lo, hi = task.joint_range[:, 0], task.joint_range[:, 1]
    soft_hi = 0.5 * (lo + hi) + 0.45 * (hi - lo)
    assert (task.ref_joint_pos[50] > soft_hi + 0.02).any()  # the reference itself is beyond the soft range
    qj = env.backend.qpos[:, 7:].float().clone()
    qj[:, g1.JOINT_NAMES.index("waist_pitch_joint")] = hi[14]  # the robot at the limit where the clip is not
    assert (task._beyond_reference_limits(qj, torch.zeros(5, dtype=torch.long)) > 0).all()


def test_resets_start_exactly_on_the_clip_at_the_limits(limit_clip_file):
    env = cpu_env(G1MotionTracking(motion_file=str(limit_clip_file), randomize=False, reset_noise=False), 64, seed=1)
    env.reset()
    task = env.task
    torch.testing.assert_close(env.backend.qpos[:, 7:].float(), task.ref_joint_pos[task.frame], atol=1e-6, rtol=0)
    noisy = cpu_env(G1MotionTracking(motion_file=str(limit_clip_file), randomize=False), 64, seed=1)
    noisy.reset()
    q, t = noisy.backend.qpos[:, 7:].float(), noisy.task
    assert (q >= t._reset_lo[t.frame] - 1e-6).all() and (q <= t._reset_hi[t.frame] + 1e-6).all()


def test_the_default_action_range_reaches_every_frame(limit_clip_file):
    for motion_file in (None, str(limit_clip_file)):
        task = G1MotionTracking(motion_file=motion_file, randomize=False)
        task.bind(1, torch.device("cpu"))
        assert task.action_range == "joint_limits"
        need = (task.ref_joint_pos - task.q_default) / task.action_scale
        assert need.abs().max() <= 1.0 + 1e-6, motion_file
    pd = G1MotionTracking(motion_file=str(limit_clip_file), randomize=False, action_range="pd")
    pd.bind(1, torch.device("cpu"))
    assert ((pd.ref_joint_pos - pd.q_default) / pd.action_scale).abs().max() > 1.5  # what pd could not reach
    from duorl.envs.motion.checks import action_scales

    np.testing.assert_allclose(action_scales(g1.load().jnt_range[1:])["joint_limits"], task.action_scale.numpy(), rtol=1e-6)


def test_play_draws_the_reference_pose_as_a_ghost():
    """What `duorl play --video` adds to the scene for this task (no OpenGL needed to build it)."""
    import mujoco

    from duorl.cli.play import REFERENCE_RGBA, add_reference

    env = cpu_env(G1MotionTracking(randomize=False, reset_noise=False), 1, seed=0)
    env.reset()
    task = env.task
    put_robot_on_clip(env, torch.tensor([200]))
    torch.testing.assert_close(task.reference_qpos(0), env.backend.qpos[0].float(), atol=1e-6, rtol=0)
    m = task.mj_model()
    d, ref = mujoco.MjData(m), mujoco.MjData(m)
    ref.qpos[:] = task.reference_qpos(0).double().numpy()
    ref.qpos[0] += 1.0  # a reference 1 m ahead of the robot
    mujoco.mj_kinematics(m, ref)
    opt, scene = mujoco.MjvOption(), mujoco.MjvScene(m, maxgeom=500)
    opt.geomgroup[:] = 1
    mujoco.mjv_updateScene(m, d, opt, mujoco.MjvPerturb(), mujoco.MjvCamera(), mujoco.mjtCatBit.mjCAT_ALL, scene)
    before = scene.ngeom
    added = add_reference(m, ref, scene, opt)
    robot_geoms = int((m.geom_bodyid > 0).sum())
    assert added == robot_geoms and scene.ngeom == before + added
    ghost = [scene.geoms[i] for i in range(before, scene.ngeom)]
    assert all(np.allclose(g.rgba, REFERENCE_RGBA, atol=1e-6) for g in ghost)
    np.testing.assert_allclose(sorted(g.pos[0] for g in ghost), sorted(ref.geom_xpos[m.geom_bodyid > 0, 0]), atol=1e-5)
