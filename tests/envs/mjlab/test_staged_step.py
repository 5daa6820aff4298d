"""The staged mjlab step (envs/mjlab/staged_step.py) against mjlab's own step, side by side on Warp's CPU
device: two envs built from the same seed, stepped with the same actions, each from the same state of the
global random stream (saved before one steps and restored for the other), so that every draw either makes
must be the same draw. `cpu-replay` replays the graph stages as a CUDA graph would (only their recorded
torch ops and warp launches, on the tensors they were recorded with; their Python skipped), so it also
catches a stage that depends on Python state.

Equality is bitwise: observations (actor, critic, the final observation of every env), rewards,
terminations, time-outs, the Task/ rows, the episode sums, and the random stream's state after each step
(the same number of draws). The same ops run in both; where the staged step selects rows by masks
instead of index lists (graph_safe.py) the elements are computed by the same elementwise ops.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from duorl.config.schema import TaskConfig

G1 = "Mjlab-Velocity-Flat-Unitree-G1"
CARTPOLE = "Mjlab-Cartpole-Swingup"


def _pair(task_id: str, num_envs: int, episode_steps: int, graphs: str, edit: Any = None,
          reset_graphs: bool | None = None) -> tuple[Any, Any]:
    """(mjlab's own step, the staged step) envs of `task_id` on Warp's CPU device, both built from seed 3;
    `edit(cfg)` changes mjlab's configuration of both (cheaper physics for the CPU)."""
    return _pair_on("cpu", task_id, num_envs, episode_steps, graphs, edit, reset_graphs)


def _pair_on(device: str, task_id: str, num_envs: int, episode_steps: int, graphs: str,
             edit: Any = None, reset_graphs: bool | None = None) -> tuple[Any, Any]:
    """_pair on `device` (the GPU test's too)."""
    from duorl.envs.mjlab.loader import build_env, env_cfg
    from duorl.envs.mjlab.spec import describe, obs_groups
    from duorl.envs.mjlab.vec_env import MjlabVecEnv, attach_staged_step

    envs = []
    for _ in range(2):
        cfg = env_cfg(task_id, TaskConfig(name=f"mjlab:{task_id}", max_episode_steps=episode_steps), num_envs, 3)
        if edit is not None:
            edit(cfg)
            _episode_steps(cfg, episode_steps)  # the edit may change the control step
        groups = obs_groups(task_id, cfg)
        env = build_env(cfg, device)
        spec, rows, _ = describe(task_id, env, groups)
        envs.append(MjlabVecEnv(env, spec, groups.actor, groups.critic, rows, bool(cfg.is_finite_horizon)))
    eager, staged = envs
    attach_staged_step(staged, required=True, graphs=graphs, reset_graphs=reset_graphs)
    return eager, staged


def _lockstep_pair(pair: tuple[Any, Any], steps: int) -> tuple[dict[str, int], dict[str, Any]]:
    """`_lockstep` over a `_pair`'s envs for `steps` ticks, then the staged step's describe(); both envs closed."""
    eager, staged = pair
    try:
        counts = _lockstep(eager, staged, steps)
        return counts, staged.staged.describe()
    finally:
        eager.close()
        staged.close()


def _episode_steps(cfg: Any, steps: int) -> None:
    """Episodes of `steps` control steps whatever the edit made of the control step (as loader.env_cfg)."""
    import math

    from duorl.envs.mjlab.loader import max_episode_steps_of

    cfg.episode_length_s = steps * cfg.sim.mujoco.timestep * cfg.decimation
    while max_episode_steps_of(cfg) > steps:
        cfg.episode_length_s = math.nextafter(cfg.episode_length_s, 0.0)


def _same(a: Any, b: Any, what: str) -> None:
    if isinstance(a, dict):
        assert a.keys() == b.keys(), what
        for k in a:
            _same(a[k], b[k], f"{what}.{k}")
        return
    assert a.dtype == b.dtype and a.shape == b.shape, what
    assert torch.equal(a, b), f"{what} differs (max |diff| {(a.double() - b.double()).abs().max().item():.3g})"


def _lockstep(eager: Any, staged: Any, steps: int) -> dict[str, int]:
    """Step both `steps` times with the same random actions; assert every output equal; the counts of
    terminations, time-outs and steps with a reset."""
    counts = {"terminated": 0, "truncated": 0, "steps_with_reset": 0}
    torch.manual_seed(11)
    obs_e = eager.reset()
    torch.manual_seed(11)
    obs_s = staged.reset()
    _same(obs_e, obs_s, "reset obs")
    actions = torch.Generator().manual_seed(5)
    n, a = eager.num_envs, eager.spec.action_dim
    for step in range(steps):
        act = torch.rand(n, a, generator=actions) * 2 - 1
        start = torch.get_rng_state()
        out_e = eager.step(act)
        after_e = torch.get_rng_state()
        torch.set_rng_state(start)
        out_s = staged.step(act)
        assert torch.equal(torch.get_rng_state(), after_e), f"step {step}: a different number of random draws"
        for i, what in enumerate(("obs", "reward", "terminated", "truncated")):
            _same(out_e[i], out_s[i], f"step {step}: {what}")
        info_e, info_s = out_e[4], out_s[4]
        for key in ("final_obs", "episode_return", "episode_length", "metrics"):
            _same(info_e[key], info_s[key], f"step {step}: info[{key}]")
        assert int(info_e["nan_resets"]) == int(info_s["nan_resets"]) == 0
        counts["terminated"] += int(out_e[2].sum())
        counts["truncated"] += int(out_e[3].sum())
        counts["steps_with_reset"] += int((out_e[2] | out_e[3]).any())
    return counts


def _cheap_g1(cfg: Any) -> None:
    import math

    # the CPU steps 300 ticks in time: 2 physics steps per tick, a short solver (the same in both envs)
    cfg.decimation = 2
    cfg.sim.mujoco.iterations = 3
    cfg.sim.mujoco.ls_iterations = 4
    # and everything happens inside them: pushes and command resampling every few ticks, a robot tilted
    # past 15 degrees ends its episode (mjlab's task: 1-3 s, 3-8 s, 70 degrees)
    cfg.events["push_robot"].interval_range_s = (0.05, 0.2)
    cfg.commands["twist"].resampling_time_range = (0.05, 0.3)
    cfg.terminations["fell_over"].params["limit_angle"] = math.radians(15.0)
    # the velocity curriculum's next stage at tick 150, not 120,000: the graphs read the command ranges
    stages = cfg.curriculum["command_vel"].params["velocity_stages"]
    stages[1]["step"], stages[2]["step"] = 150, 10**9


def _cheap_cartpole(cfg: Any) -> None:
    # a replayed graph runs the solver's fixed iteration loop (the CPU has no conditional nodes): 5, not 100
    cfg.sim.mujoco.iterations = 5
    cfg.sim.mujoco.ls_iterations = 5


@pytest.mark.slow
def test_g1_velocity_staged_step_replayed_equals_mjlabs_own_step():
    """300 ticks of the G1 velocity task, the staged step's graph stages replayed: pushes, command
    resampling, falls and time-outs happen inside them, and every output is bitwise mjlab's own."""
    counts, state = _lockstep_pair(_pair(G1, 3, 60, "cpu-replay", _cheap_g1), 300)
    # every graph stage was captured and replayed (none fell back to eager), and the reset bodies of the
    # counts of done envs that came back more than once
    graphs = {name: s for name, s in state["stages"].items() if "runs" in s}
    assert set(graphs) == {"physics", "flags", "commands.0.pre", "observe", "reset.tail"}, state["stages"]
    assert all(s["graph"] for s in graphs.values()), state["stages"]
    assert state["reset_body"]["graph_per_count"] and state["reset_body"]["captured"] >= 1, state["reset_body"]
    # the curriculum's stage change invalidated the graphs once (captured again, still equal)
    assert state["invalidations"] == 1, state
    # the episodes ended both ways, and the host-read stages had work
    assert counts["truncated"] >= 2 and counts["terminated"] >= 3 and counts["steps_with_reset"] >= 8, counts
    reads = state["host_read_counts"]
    assert reads["interval"] > 0 and reads["command"] > 0, reads  # pushes fired, commands resampled
    assert state["replacements"] == ["command twist: _update_command, _resample_command",
                                     "sensor foot_height_scan: _extract_yaw_rotation"]


@pytest.mark.parametrize("graphs,steps", [
    pytest.param("cpu-replay", 150, marks=pytest.mark.slow),
    ("none", 60),  # what the CPU runs with sim.mjlab_staged_step=true
])
def test_cartpole_staged_step_equals_mjlabs_own_step(graphs, steps):
    """The same comparison on the swing-up (no commands, no sensors), 25-tick episodes."""
    counts, state = _lockstep_pair(_pair(CARTPOLE, 4, 25, graphs, _cheap_cartpole), steps)
    assert counts["truncated"] == 4 * (steps // 25) and counts["steps_with_reset"] == steps // 25, counts
    graphs_run = [s["graph"] for s in state["stages"].values() if "runs" in s]
    assert graphs_run and all(graphs_run) if graphs == "cpu-replay" else not any(graphs_run), state["stages"]


def test_cartpole_staged_step_with_the_reset_body_eager_equals_mjlabs_own_step():
    """What CUDA runs by default (staged_step.RESET_GRAPHS_BY_MODE): the graph stages replayed, the reset
    body mjlab's own _reset_idx between them."""
    counts, state = _lockstep_pair(_pair(CARTPOLE, 4, 25, "cpu-replay", _cheap_cartpole, reset_graphs=False), 75)
    assert counts["truncated"] == 4 * 3 and counts["steps_with_reset"] == 3, counts
    assert not state["reset_body"]["graph_per_count"] and state["reset_body"]["counts_seen"] == 0, state["reset_body"]
    assert "RESET_GRAPHS_BY_MODE" in state["reset_body"]["eager_because"], state["reset_body"]
    graphs_run = {name: s["graph"] for name, s in state["stages"].items() if "runs" in s}
    assert graphs_run and all(graphs_run.values()) and "reset.tail" in graphs_run, state["stages"]


@pytest.mark.slow
def test_g1_velocity_staged_step_eager_equals_mjlabs_own_step():
    """What the CPU runs with sim.mjlab_staged_step=true: every stage eager, equal to mjlab's own step."""
    counts, state = _lockstep_pair(_pair(G1, 2, 20, "none", _cheap_g1), 60)
    assert counts["steps_with_reset"] >= 3, counts
    assert not any(s.get("graph") for s in state["stages"].values())


def test_the_switch_picks_the_staged_step_on_cuda_only_by_default():
    from duorl.config.switches import mjlab_staged_step_enabled
    from duorl.envs.task_sources import source_of

    staged = source_of(f"mjlab:{G1}").stated.steps_in_stages
    assert staged and not source_of("g1_walk_flat").stated.steps_in_stages
    assert mjlab_staged_step_enabled(staged, None, "cuda:0") and not mjlab_staged_step_enabled(staged, None, "cpu")
    assert mjlab_staged_step_enabled(staged, True, "cpu") and not mjlab_staged_step_enabled(staged, False, "cuda:0")
    assert not mjlab_staged_step_enabled(False, True, "cuda:0")


def test_a_staged_step_for_a_task_that_is_not_mjlabs_is_refused():
    from duorl.cli.configure import load_config
    from duorl.config.errors import ConfigError

    with pytest.raises(ConfigError, match=r"sim.mjlab_staged_step.*only an mjlab task"):
        load_config("sac", "pendulum_swingup", "mujoco", ["sim.mjlab_staged_step=true"])


@pytest.mark.parametrize("task, sim, overrides, fragment", [
    ("pendulum_swingup", "mujoco", ["sim.mjlab_reset_graphs=true"], "captures the reset of mjlab's staged step"),
    (f"mjlab:{CARTPOLE}", "mjwarp", ["sim.mjlab_reset_graphs=true", "sim.mjlab_staged_step=false"],
     "part of the staged step"),
    (f"mjlab:{CARTPOLE}", "mjwarp", ["sim.mjlab_reset_graphs=true", "training.devices=[cpu]"],
     "needs the envs on a CUDA device"),
])
def test_reset_graphs_without_a_staged_step_on_cuda_are_refused(task, sim, overrides, fragment):
    from duorl.cli.configure import load_config
    from duorl.config.errors import ConfigError

    with pytest.raises(ConfigError, match=r"sim.mjlab_reset_graphs") as e:
        load_config("sac", task, sim, overrides)
    assert fragment in str(e.value)
    if "training.devices=[cpu]" in overrides:  # the fix names the GPU, not a --sim the task already has
        assert "put the envs on a GPU: training.devices=[0] on a GPU machine" in str(e.value)
        assert "--sim mjwarp" not in str(e.value)


@pytest.mark.parametrize("configured, expected", [(True, True), (False, False), (None, False)])
def test_the_reset_graphs_key_reaches_the_staged_step(configured, expected):
    """sim.mjlab_reset_graphs as the run's env factory hands it on (null: RESET_GRAPHS_BY_MODE, off but for
    the CPU replay of the tests)."""
    from duorl.config.schema import SimConfig
    from duorl.envs.task_sources import source_of

    sim = SimConfig(name="mjwarp", mjlab_staged_step=True, mjlab_reset_graphs=configured)
    env = source_of(f"mjlab:{CARTPOLE}").make_vec_env(TaskConfig(name=f"mjlab:{CARTPOLE}", max_episode_steps=5),
                                                      sim, 2, "cpu", 1)
    try:
        assert env.staged is not None and env.staged.reset_graphs is expected
    finally:
        env.close()


def test_a_bad_scalar_write_mode_is_refused_by_name(monkeypatch):
    from duorl.envs import mjlab
    from duorl.envs.mjlab import staged_step

    monkeypatch.setattr(staged_step, "SCALAR_WRITES", "pinned")
    with pytest.raises(ValueError, match=r"DUORL_MJLAB_SCALAR_WRITES='pinned': one of \('device', 'host'\)"):
        mjlab.make_vec_env(CARTPOLE, TaskConfig(name=f"mjlab:{CARTPOLE}", max_episode_steps=5), 2, "cpu", 1,
                           staged_step=True)


def test_make_vec_env_attaches_the_staged_step_when_asked():
    from duorl.envs import mjlab

    env = mjlab.make_vec_env(CARTPOLE, TaskConfig(name=f"mjlab:{CARTPOLE}", max_episode_steps=5), 2, "cpu", 1,
                             staged_step=True)
    try:
        assert env.staged is not None and env.staged.graphs == "none"
        env.reset()
        obs, reward, terminated, truncated, info = env.step(torch.zeros(2, 1))
        assert obs["actor"].shape == (2, 5) and reward.shape == (2,) and info["final_obs"]["critic"].shape == (2, 5)
    finally:
        env.close()
    plain = mjlab.make_vec_env(CARTPOLE, TaskConfig(name=f"mjlab:{CARTPOLE}"), 1, "cpu", 1)
    assert plain.staged is None  # null: the CPU keeps mjlab's own step
    plain.close()
