"""g1_walk_flat on the mujoco backend: shapes, finite outputs, observation layout, commands,
terminations, randomisation and reward sanity (standing still under a zero command beats falling)."""

import math

import pytest
import torch

from duorl.config.schema import SimConfig
from duorl.envs.task_sources import task_config
from duorl.envs import quat as Q
from duorl.envs.registry import env_spec, make_vec_env
from duorl.envs.tasks import g1_walk
from duorl.envs.tasks.g1_walk import G1WalkFlat, expected_foot_height

from .g1_util import cpu_env, pitch_of, standing_controller

N = 4


def test_spec():
    spec = env_spec(task_config("g1_walk_flat"))
    assert (spec.actor_obs_dim, spec.critic_obs_dim, spec.action_dim) == (98, 101, 29)
    assert spec.control_dt == pytest.approx(0.02) and spec.max_episode_steps == 1000  # 20 s at 50 Hz
    assert env_spec(task_config("g1_walk_flat", max_episode_steps=7)).max_episode_steps == 7


def test_builds_and_steps_with_finite_outputs():
    env = make_vec_env(task_config("g1_walk_flat", max_episode_steps=40), SimConfig(name="mujoco", nthread=1), N, "cpu", 3)
    obs = env.reset()
    assert obs["actor"].shape == (N, 98) and obs["critic"].shape == (N, 101)
    g = torch.Generator().manual_seed(0)
    done_any = False
    for _ in range(45):  # random actions: falls and a time limit
        obs, r, te, tr, info = env.step(torch.rand(N, 29, generator=g) * 2 - 1)
        for t in (obs["actor"], obs["critic"], r, info["final_obs"]["actor"]):
            assert torch.isfinite(t).all()
        assert r.dtype == torch.float32 and int(info["nan_resets"]) == 0
        done_any |= bool((te | tr).any())
    assert done_any
    env.close()


def test_observation_layout():
    env = cpu_env(G1WalkFlat(randomize=False), 8, seed=1)
    obs = env.reset()["actor"]
    task, qpos = env.task, env.backend.qpos.float()
    assert torch.all(obs[:, 0:3] == 0)  # at rest
    torch.testing.assert_close(obs[:, 3:6], Q.gravity_in(qpos[:, 3:7]))
    assert torch.allclose(obs[:, 5], torch.tensor(-1.0))  # upright (random yaw only)
    torch.testing.assert_close(obs[:, 6:9], task.command)
    torch.testing.assert_close(obs[:, 9:38], qpos[:, 7:] - task.q_default)
    assert torch.all(obs[:, 38:67] == 0) and torch.all(obs[:, 67:96] == 0)
    torch.testing.assert_close(obs[:, 96], torch.sin(task.phase))
    torch.testing.assert_close(obs[:, 97], torch.cos(task.phase))
    a = torch.linspace(-1, 1, 29).repeat(8, 1)
    *_, info = env.step(a * 3.0)
    torch.testing.assert_close(info["final_obs"]["actor"][:, 67:96], (3.0 * a).clamp(-1, 1))  # clipped
    torch.testing.assert_close(info["final_obs"]["critic"][:, 3:], info["final_obs"]["actor"])
    lin = Q.rotate_inv(env.backend.qpos[:, 3:7].float(), env.backend.qvel[:, :3].float())
    torch.testing.assert_close(info["final_obs"]["critic"][:, :3], 2.0 * lin)


def test_reset_lands_the_feet_and_randomises():
    env = cpu_env(G1WalkFlat(), 16, seed=2)
    env.reset()
    task = env.task
    feet, _ = task.foot_sites(env.backend.qpos.float())
    torch.testing.assert_close(feet[..., 2].min(dim=1).values, torch.full((16,), g1_walk.RESET_DROP))
    assert (task.command.abs() <= 1).all() and (task.gait_freq >= 0.8).all() and (task.gait_freq <= 1.2).all()
    assert len(set(task.command[:, 0].tolist())) > 4 and task.phase.std() > 0
    # per-env randomised foot friction and torso mass, the same on every foot of one robot
    mu = torch.stack([torch.as_tensor(m.geom_friction[task.layout.foot_geoms, 0]) for m in env.backend.models])
    assert (mu.std(dim=1) == 0).all() and (mu[:, 0] >= 0.5).all() and (mu[:, 0] <= 1.25).all() and mu[:, 0].std() > 0
    torso = task.body_id("torso_link")
    mass = torch.tensor([m.body_mass[torso] for m in env.backend.models])
    base = task.host_model().body_mass[torso]
    assert ((mass - base) >= -1).all() and ((mass - base) <= 3).all() and mass.std() > 0
    sub = torch.tensor([m.body_subtreemass[0] for m in env.backend.models])
    torch.testing.assert_close(sub - task.host_model().body_subtreemass[0], mass - base, rtol=0, atol=1e-5)


def test_commands_are_redrawn_within_an_episode():
    env = cpu_env(G1WalkFlat(randomize=False), N, seed=4)
    task = env.task
    task.command_steps = 3  # instead of every 10 s
    env.reset()
    seen = [task.command.clone()]
    for _ in range(6):
        _, _, te, tr, info = env.step(torch.zeros(N, 29))
        assert not (te | tr).any()
        seen.append(task.command.clone())
    changed = [not torch.equal(a, b) for a, b in zip(seen, seen[1:])]
    assert changed == [False, False, True, False, False, True]
    # the reward of a step uses the command the policy saw; the next observation shows the new one
    torch.testing.assert_close(info["final_obs"]["actor"][:, 6:9], task.command)


def test_gait_clock():
    z = expected_foot_height(torch.tensor([-math.pi, -math.pi / 2, 0.0, math.pi / 2, math.pi]))
    torch.testing.assert_close(z, torch.tensor([0.0, 0.045, 0.09, 0.045, 0.0]))
    env = cpu_env(G1WalkFlat(randomize=False), 2, seed=0)
    env.reset()
    task = env.task
    p0 = task.phase.clone()
    env.step(torch.zeros(2, 29))
    expect = torch.remainder(p0 + 2 * math.pi * 0.02 * task.gait_freq + math.pi, 2 * math.pi) - math.pi
    torch.testing.assert_close(task.phase, expect)
    task.command[0] = 0.0
    phases = task.gait_phases()
    assert torch.allclose(phases[0], torch.tensor(math.pi))  # standing: both feet planted
    torch.testing.assert_close(torch.remainder(phases[1, 1] - phases[1, 0], 2 * math.pi), torch.tensor(math.pi))


def test_standing_still_scores_above_falling():
    """Zero command, 100 steps (2 s): a standing controller keeps the G1 up and collects more
    reward than zero actions, with which the soft PD lets it fall (terminated)."""
    env = cpu_env(G1WalkFlat(randomize=False, reset_noise=False), 2, seed=0)
    env.reset()
    env.task.command.zero_()
    returns, fell_at = torch.zeros(2), None
    for t in range(100):
        a = standing_controller(env)
        a[1] = 0.0  # env 1: zero actions
        _, r, te, tr, info = env.step(a)
        assert not tr.any()
        live = torch.tensor([True, fell_at is None])
        returns += torch.where(live, r, torch.zeros_like(r))
        assert not te[0], "the standing controller fell"
        if te[1] and fell_at is None:
            fell_at = t
            assert info["episode_return"][1] == pytest.approx(float(returns[1]), rel=1e-5)
        env.task.command.zero_()  # the fallen env's reset drew a new one
    assert fell_at is not None and fell_at < 100
    stand_per_step, fall_per_step = returns[0] / 100, returns[1] / (fell_at + 1)
    assert returns[0] > 1.5 * returns[1] and stand_per_step > fall_per_step
    terms = env.task.reward_terms(env.backend)
    assert terms["track_lin_vel"][0] > 0.9 and terms["feet_phase"][0] > 0.9 and terms["orientation"][0] < 0.01


def test_falls_terminate():
    env = cpu_env(G1WalkFlat(randomize=False, reset_noise=False), 3, seed=0)
    env.reset()
    sim = env.backend
    qpos = sim.qpos.clone()
    tilt = Q.from_axis_angle(torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64), torch.tensor(math.radians(75.0), dtype=torch.float64))
    qpos[0, 3:7] = tilt
    qpos[1, 2] = 0.3  # sitting on the floor
    sim.reset_envs(torch.tensor([True, True, False]), qpos, sim.qvel.clone())
    assert env.task.terminated(sim).tolist() == [True, True, False]
    assert pitch_of(sim.qpos)[2].abs() < 1e-6


def test_action_rate_reads_the_policy_outputs_not_the_explored_actions():
    """As published for FastSAC: the penalty sees changes of the policy's own output (tanh(mean)), so
    exploration noise is not penalised; the observation's last action is the one applied."""
    task = G1WalkFlat()
    task.bind(2, torch.device("cpu"))
    p1, p2 = torch.full((2, 29), 0.1), torch.full((2, 29), 0.2)
    noise = torch.linspace(-0.5, 0.5, 29).expand(2, 29)
    task.apply_action(p1 + noise, p1)
    task.apply_action(p2 - noise, p2)
    torch.testing.assert_close(task.action_rate(), torch.full((2,), 29 * 0.1**2))
    torch.testing.assert_close(task.last_action, (p2 - noise).clamp(-1, 1))
    # without policy outputs (a deterministic policy: play, evaluation) the applied actions count
    task.apply_action(p1)
    torch.testing.assert_close(task.action_rate(), torch.full((2,), 29 * 0.1**2))
    # a reset clears both histories
    task.reset_actions(torch.tensor([True, False]))
    assert task.last_policy_action[0].abs().sum() == 0 and task.last_policy_action[1].abs().sum() > 0


def test_action_range_joint_limits_reaches_the_farther_limit():
    """task.action_range=joint_limits (the published FastSAC G1 scaling): +-1 moves a joint target to
    the standing pose +- its distance to the farther limit; the default (pd) moves it 0.25 * effort / kp."""
    wide, pd = G1WalkFlat(action_range="joint_limits"), G1WalkFlat()
    for t in (wide, pd):
        t.bind(1, torch.device("cpu"))
    lo, hi, q0 = wide.joint_range[:, 0], wide.joint_range[:, 1], wide.q_default
    farther = torch.maximum(hi - q0, q0 - lo)
    torch.testing.assert_close(wide.apply_action(torch.ones(1, 29))[0] - q0, farther)
    torch.testing.assert_close(wide.apply_action(-torch.ones(1, 29))[0] - q0, -farther)
    hip_roll = 1  # left hip roll: [-0.52, 2.97] about 0
    assert abs(float(farther[hip_roll]) - 2.967) < 1e-3
    assert float(pd.action_scale[hip_roll]) < 0.5
    with pytest.raises(ValueError, match="task.action_range"):
        G1WalkFlat(action_range="full")


def test_state_dict_round_trip():
    """A rebuilt env (same seed: same randomised worlds) continues exactly from a saved state,
    whatever it did before; two threads, so the rollout's thread assignment must not matter."""
    a, b = cpu_env(G1WalkFlat(), N, seed=5, nthread=2), cpu_env(G1WalkFlat(), N, seed=5, nthread=2)
    a.reset(), b.reset()
    for _ in range(3):
        a.step(torch.full((N, 29), 0.1))
        b.step(torch.full((N, 29), -0.5))
    b.load_state_dict(a.state_dict())
    for _ in range(3):
        oa, ra, *_ = a.step(torch.full((N, 29), -0.2))
        ob, rb, *_ = b.step(torch.full((N, 29), -0.2))
        assert torch.equal(oa["critic"], ob["critic"]) and torch.equal(ra, rb)


def test_tracking_error_metrics():
    """info["metrics"] carries Task/lin_vel_error and Task/ang_vel_error: near zero for a robot standing
    under a zero command, the commanded speed for one standing under a walking command; then the
    penalty scale and each reward term's contribution (Task/rew_<term>), which sum to the reward."""
    ppo = g1_walk.PENALTY_CURRICULA["ppo"]
    env = cpu_env(G1WalkFlat(randomize=False, reset_noise=False, penalty_curriculum="ppo"), 2, seed=0)
    names = env.spec.metric_names
    assert names[:3] == ("lin_vel_error", "ang_vel_error", "penalty_scale")
    assert names[3:] == tuple(f"rew_{k}" for k in g1_walk.WEIGHTS)
    env.reset()
    for _ in range(30):
        env.task.command.zero_()
        env.task.command[1, 0] = 0.8  # env 1 is asked to walk forward at 0.8 m/s, and stands
        _, reward, te, _, info = env.step(standing_controller(env))
        assert not te.any()
    per_env = env.task.metrics(env.backend)
    assert per_env.shape == (2, len(names))
    assert per_env[0, 0] < 0.1 and per_env[0, 1] < 0.2
    assert per_env[1, 0] == pytest.approx(0.8, abs=0.1)
    assert info["metrics"].shape == (2, len(names))  # per env: the collector takes the means
    step_means = info["metrics"].mean(dim=0)
    torch.testing.assert_close(info["metrics"][:, :2], per_env[:, :2])
    # the scale the step's reward used; the step's advance() then moved it by one curriculum step
    assert float(step_means[2]) == pytest.approx(float(env.task.penalty_scale) / (1 - ppo.degree), rel=1e-5)
    # the contributions are the step's reward, term by term: alive is 10 * dt, penalties are negative
    torch.testing.assert_close(info["metrics"][:, 3:].sum(dim=1), reward, rtol=1e-5, atol=1e-6)
    by_name = dict(zip(names, step_means.tolist()))
    assert by_name["rew_alive"] == pytest.approx(10.0 * env.task.control_dt)
    assert by_name["rew_pose"] <= 0.0 and by_name["rew_track_lin_vel"] > 0.0


def _long_then_short_episodes(task, n_envs: int, length: int, rounds: int) -> None:
    everyone = torch.ones(n_envs, dtype=torch.bool)
    for _ in range(rounds):
        task.steps.fill_(length)
        task.track_episode_lengths(everyone)


@pytest.mark.parametrize("name", ["fastsac", "ppo"])
def test_penalty_curriculum(name):
    """The scale starts at the schedule's init; it falls while finished episodes are short (< 15% of the
    maximum) and rises while they are long (> 75%), multiplicatively by the schedule's degree, within
    [floor, 1]; the reward is the gains plus the scaled penalties."""
    c = g1_walk.PENALTY_CURRICULA[name]
    task = G1WalkFlat(randomize=False, max_episode_steps=100, penalty_curriculum=name)
    env = cpu_env(task, 4, seed=0)
    env.reset()
    assert float(task.penalty_scale) == pytest.approx(c.init)
    _long_then_short_episodes(task, 4, 90, 1000)  # 4000 episodes: the mean over the last ~1000 is about 90
    assert float(task.mean_episode_length) > 75
    before = float(task.penalty_scale)
    for _ in range(10):
        task.update_penalty_scale()
    assert float(task.penalty_scale) == pytest.approx(before * (1 + c.degree) ** 10, rel=1e-5)
    for _ in range(math.ceil(math.log(c.ceiling / c.init) / math.log(1 + c.degree))):
        task.update_penalty_scale()
    assert float(task.penalty_scale) == pytest.approx(c.ceiling)
    _long_then_short_episodes(task, 4, 3, 2000)
    assert float(task.mean_episode_length) < 15
    task.update_penalty_scale()
    assert float(task.penalty_scale) == pytest.approx(c.ceiling * (1 - c.degree), rel=1e-5)
    for _ in range(20000):
        task.update_penalty_scale()
    assert float(task.penalty_scale) == pytest.approx(max(c.floor, c.ceiling * (1 - c.degree) ** 20001), rel=1e-3)
    # the reward splits by sign of the weight
    terms = task.reward_terms(env.backend)
    dt = task.control_dt
    gains = sum(w * dt * terms[k] for k, w in g1_walk.WEIGHTS.items() if w > 0)
    pens = sum(w * dt * terms[k] for k, w in g1_walk.WEIGHTS.items() if w < 0)
    torch.testing.assert_close(task.reward(env.backend), gains + task.penalty_scale * pens)


def test_penalty_curriculum_default_off_and_config():
    """The default is the published PPO G1 schedule (start 0.1, floor 0), the one that measured best on
    the H200; `off` holds the scale at 1;
    task.penalty_curriculum reaches the task, and the names agree with the config's."""
    from duorl.envs.tasks.keys import PENALTY_CURRICULA

    assert tuple(g1_walk.PENALTY_CURRICULA) == PENALTY_CURRICULA
    assert G1WalkFlat().penalty_curriculum == g1_walk.PenaltyCurriculum(init=0.1, floor=0.0, ceiling=1.0, degree=0.00025)
    off = G1WalkFlat(randomize=False, penalty_curriculum="off")
    cpu_env(off, 2, seed=0).reset()
    off.update_penalty_scale()
    assert float(off.penalty_scale) == 1.0
    env = make_vec_env(task_config("g1_walk_flat", penalty_curriculum="fastsac"), SimConfig(name="mujoco"), 2, "cpu", seed=0)
    assert env.task.penalty_curriculum == g1_walk.PENALTY_CURRICULA["fastsac"]
    with pytest.raises(ValueError, match="task.penalty_curriculum"):
        G1WalkFlat(penalty_curriculum="gentle")
