"""The collector tick (runtime/tick.py) on the CPU: what it writes, its device-side tick index, and
the refusals around its CUDA graph. The captured tick's equality with the eager one is in
test_tick_cuda.py (GPU)."""

import json

from torch.utils._python_dispatch import TorchDispatchMode

import pytest
import torch

from duorl.cli.bench.collector import build_collector_tick
from duorl.config.errors import ConfigError
from duorl.cli.configure import load_config
from duorl.runtime.replay import ReplayLayout, ReplayRing
from duorl.runtime.tick import EpisodeSums, TickCaptureError
from tests.conftest import run_duorl

TINY_ALGO = ["algo.actor_hidden_dims=[16,16]", "algo.critic_hidden_dims=[16,16]", "algo.num_atoms=11",
             "task.max_episode_steps=6", "sim.nthread=1"]


def _ring(capacity: int = 5, n: int = 3) -> ReplayRing:
    return ReplayRing.allocate(ReplayLayout(n, capacity, 2, 3, 1), torch.device("cpu"))


def test_device_tick_index_writes_what_an_int_index_writes():
    g = torch.Generator().manual_seed(0)
    by_int, by_tensor = _ring(), _ring()
    tick_t = torch.zeros((), dtype=torch.int64)
    for tick in range(12):  # wraps the 5-row ring twice
        r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
        obs, nxt = {"actor": r(3, 2), "critic": r(3, 3)}, {"actor": r(3, 2), "critic": r(3, 3)}
        args = (obs, r(3, 1), r(3), nxt, (r(3) > 0).float(), (r(3) > 1).float())
        by_int.write(tick, *args)
        by_tensor.write(tick_t, *args)
        tick_t += 1
    for key in by_int.t:
        assert torch.equal(by_int.t[key], by_tensor.t[key]), key
    assert by_int.t["tick"].tolist() == [10, 11, 7, 8, 9]


@pytest.mark.parametrize("algo", ["sac", "flashsac"])
def test_tick_does_what_the_collector_loop_did(algo):
    """Policy, noise, env step, replay write and the next observation, tick by tick, against the loop
    written out by hand with the same seeds; episodes end inside the run (6-step episodes)."""
    cfg = load_config(algo, "pendulum_swingup", "mujoco", TINY_ALGO)
    n, ticks = 4, 15
    tick = build_collector_tick(cfg, n, "cpu", cuda_graph=False, seed=5, replay_ticks=8)
    ref = build_collector_tick(cfg, n, "cpu", cuda_graph=False, seed=5, replay_ticks=8)
    tick.run(0, ticks)
    obs = {k: v.clone() for k, v in ref.obs.items()}
    episodes = 0.0
    with torch.no_grad():
        for t in range(ticks):
            action = ref.actor.explore(obs["actor"], ref.generator)
            nxt, reward, term, trunc, info = ref.env.step(action)
            ref.ring.write(t, obs, action, reward, info["final_obs"], term.float(), trunc.float())
            episodes += float((term | trunc).sum())
            obs = nxt
    for key in ref.ring.t:
        assert torch.equal(tick.ring.t[key], ref.ring.t[key]), key
    for key in obs:
        assert torch.equal(tick.obs[key], obs[key]), key
    assert int(tick.tick) == ticks
    assert tick.sums.result()["episodes"] == episodes == 2 * n  # ticks 6 and 12 end every episode
    # a new iteration restarts the sums and sets the index
    tick.begin_iteration(40)
    assert int(tick.tick) == 40 and tick.sums.result()["episodes"] == 0.0


def test_the_tick_hands_the_env_the_policy_output_behind_each_action():
    cfg = load_config("sac", "pendulum_swingup", "mujoco", TINY_ALGO)
    tick = build_collector_tick(cfg, 3, "cpu", cuda_graph=False, seed=2, replay_ticks=4)
    seen = []
    task = tick.env.task
    plain = task.apply_action
    task.apply_action = lambda a, p=None: (seen.append((a.clone(), p)), plain(a, p))[1]
    obs = tick.obs["actor"].clone()
    tick.run(0, 1)
    (applied, policy), = seen
    with torch.no_grad():
        assert torch.equal(policy, tick.actor.act(obs))
    assert torch.equal(applied, tick.ring.t["action"][0]) and not torch.equal(applied, policy)


def test_eval_envs_act_deterministically_and_are_summed_apart():
    """training.eval_envs=2 of 4: the last two envs take the policy's own action tanh(mean) (so does
    replay), the first two explore; the two groups' episodes and rewards are summed apart."""
    cfg = load_config("sac", "pendulum_swingup", "mujoco", TINY_ALGO)
    tick = build_collector_tick(cfg, 4, "cpu", cuda_graph=False, seed=3, replay_ticks=8, eval_envs=2)
    obs = tick.obs["actor"].clone()
    tick.run(0, 1)
    with torch.no_grad():
        policy = tick.actor.act(obs)
    written = tick.ring.t["action"][0]
    assert torch.equal(written[2:], policy[2:])
    assert not (written[:2] == policy[:2]).all(dim=1).any()  # neither exploring env acted deterministically
    tick.run(1, 6)  # the 6-step episodes end at tick 5, inside this iteration
    r = tick.sums.result()
    rewards = tick.ring.t["reward"]  # [ticks, envs]
    assert r["episodes"] == 2.0 and r["eval_episodes"] == 2.0
    assert r["episode_length_sum"] == 12.0 and r["eval_episode_length_sum"] == 12.0
    assert r["episode_return_sum"] == pytest.approx(float(rewards[0:6, :2].sum()), rel=1e-5)
    assert r["eval_episode_return_sum"] == pytest.approx(float(rewards[0:6, 2:].sum()), rel=1e-5)
    # the per-tick mean reward is the exploring envs' alone
    assert r["reward_sum"] == pytest.approx(float(rewards[1:7, :2].mean(dim=1).sum()), rel=1e-5)


def test_episode_sums_split_the_task_metrics():
    """Per-env task metrics: the exploring envs' mean goes to task_metric_<i>, the deterministic envs'
    to eval_task_metric_<i>; without eval envs every env counts and no eval_* result exists."""
    metrics = torch.tensor([[1.0, 10.0], [2.0, 20.0], [3.0, 30.0], [8.0, 80.0]])
    info = {"episode_return": torch.zeros(4), "episode_length": torch.zeros(4), "metrics": metrics}
    split = EpisodeSums(torch.device("cpu"), 4, ("a", "b"), eval_envs=1)
    whole = EpisodeSums(torch.device("cpu"), 4, ("a", "b"))
    for sums in (split, whole):
        for _ in range(2):  # sums over the iteration's ticks
            sums.add(metrics[:, 0], torch.zeros(4, dtype=torch.bool), info)
    r = split.result()
    assert (r["task_metric_0"], r["task_metric_1"]) == (4.0, 40.0)  # 2 ticks x mean of envs 0..2
    assert (r["eval_task_metric_0"], r["eval_task_metric_1"]) == (16.0, 160.0)
    assert r["reward_sum"] == 4.0
    r = whole.result()
    assert (r["task_metric_0"], r["task_metric_1"]) == (7.0, 70.0)
    assert not any(k.startswith("eval_") for k in r)


@pytest.mark.parametrize("value,match", [("-1", "must be >= 0"), ("8", "must be below training.num_envs=8"),
                                         ("two", "wrong type")])
def test_eval_envs_refusals(value, match):
    with pytest.raises(ConfigError, match=match) as e:
        load_config("sac", "pendulum_swingup", "mujoco", ["training.num_envs=8", f"training.eval_envs={value}"])
    assert "training.eval_envs" in str(e.value)


def test_tick_graph_needs_cuda():
    cfg = load_config("sac", "pendulum_swingup", "mujoco", TINY_ALGO)
    with pytest.raises(TickCaptureError, match="sim.tick_cuda_graph"):
        build_collector_tick(cfg, 2, "cpu", cuda_graph=True)


@pytest.mark.parametrize("value,match", [("true", "needs the envs on a CUDA device"), ("maybe", "bool or null")])
def test_tick_graph_config_refusals(value, match):
    with pytest.raises(ConfigError, match=match) as e:
        load_config("sac", "pendulum_swingup", "mujoco", [f"sim.tick_cuda_graph={value}"])
    assert "sim.tick_cuda_graph" in str(e.value)


@pytest.mark.parametrize("value,match", [("true", "CUDA device"), ("maybe", "bool or null")])
def test_tick_compile_config_refusals(value, match):
    with pytest.raises(ConfigError, match=match) as e:
        load_config("sac", "pendulum_swingup", "mujoco", [f"sim.tick_compile={value}"])
    assert "sim.tick_compile" in str(e.value)


@pytest.mark.parametrize("configured,env_device,graph,expected", [
    (None, "cuda:0", True, True),   # automatic: with the tick graph
    (None, "cuda:0", False, False),  # sim.tick_cuda_graph=false: eager ticks stay plain
    (None, "cpu", False, False),
    (True, "cuda:0", False, True),  # explicit: compiled eager ticks
    (False, "cuda:0", True, False),
])
def test_tick_compile_resolution(configured, env_device, graph, expected):
    from duorl.config.switches import tick_compile_enabled

    cfg = load_config("sac", "pendulum_swingup", "mujoco", [])
    cfg.sim.tick_compile = configured
    assert tick_compile_enabled(cfg, env_device, graph) is expected


@pytest.mark.parametrize("overrides,match", [
    (["sim.solver_early_exit=true"], "needs the envs on a CUDA device"),
    (["sim.solver_early_exit=null"], "wrong type"),
])
def test_solver_early_exit_config_refusals(overrides, match):
    with pytest.raises(ConfigError, match=match) as e:
        load_config("sac", "pendulum_swingup", "mujoco", overrides)
    assert "sim.solver_early_exit" in str(e.value)


def test_solver_early_exit_refused_with_eager_ticks(monkeypatch):
    """true with sim.tick_cuda_graph=false names both keys and the fix (the envs on CUDA pass the
    device check: the switch itself is what is refused)."""
    monkeypatch.setattr("duorl.config.validate.env_device_type", lambda cfg: "cuda")
    with pytest.raises(ConfigError, match="sim.tick_cuda_graph=false runs ticks eagerly") as e:
        load_config("sac", "pendulum_swingup", "mjwarp", ["sim.solver_early_exit=true", "sim.tick_cuda_graph=false"])
    assert "sim.solver_early_exit=true" in str(e.value) and "remove sim.tick_cuda_graph" in str(e.value)


@pytest.mark.parametrize("configured,graph,expected", [
    (False, True, False),  # the default: fixed iterations
    (True, True, True),
    (True, False, False),  # eager ticks keep the fixed iterations (no host sync per iteration)
])
def test_solver_early_exit_resolution(configured, graph, expected):
    from duorl.config.switches import solver_early_exit_enabled

    cfg = load_config("sac", "pendulum_swingup", "mujoco", [])
    cfg.sim.solver_early_exit = configured
    assert solver_early_exit_enabled(cfg, graph) is expected


def test_solver_early_exit_is_refused_by_the_mujoco_backend():
    from duorl.config.schema import SimConfig
    from duorl.envs.task_sources import task_config
    from duorl.envs.registry import make_vec_env

    with pytest.raises(ValueError, match="sim.solver_early_exit is a MuJoCo Warp option"):
        make_vec_env(task_config("pendulum_swingup"), SimConfig(name="mujoco"), 2, "cpu", seed=0, solver_early_exit=True)


@pytest.mark.parametrize("key,task,value,match", [
    ("task.action_range", "g1_walk_flat", "full", "unknown action range"),
    ("task.action_range", "pendulum_swingup", "joint_limits", "the task pendulum_swingup does not declare"),
    ("task.penalty_curriculum", "g1_walk_flat", "gentle", "unknown penalty curriculum"),
    ("task.penalty_curriculum", "g1_motion_tracking", "ppo", "the task g1_motion_tracking does not declare"),
])
def test_task_option_refusals(key, task, value, match):
    with pytest.raises(ConfigError, match=match) as e:
        load_config("sac", task, "mujoco", [f"{key}={value}"])
    assert key in str(e.value)


@pytest.mark.parametrize("value", ["0", "-3", "soon"])
def test_wall_minutes_refusals(value):
    with pytest.raises(ConfigError, match="training.max_wall_minutes"):
        load_config("sac", "pendulum_swingup", "mujoco", [f"training.max_wall_minutes={value}"])


@pytest.mark.slow
def test_wall_limit_ends_a_run_as_completed_with_a_checkpoint(tmp_path):
    # 15 s, build included: on the 2-core VM with four processes at once the build alone took over 6 s
    run = tmp_path / "run"
    p = run_duorl(run, "algo.max_iterations=1000000", "training.max_wall_minutes=0.25", "algo.save_interval=1000000")
    assert p.returncode == 0, p.stderr
    assert "stopped by training.max_wall_minutes=0.25" in p.stdout
    summary = json.loads((run / "run_summary.json").read_text())
    assert summary["status"] == "completed"
    assert summary["stopped_by"] == "training.max_wall_minutes=0.25"
    assert 0 < summary["iterations"] < 1000000
    assert summary["wall_s"] < 60
    assert (run / "checkpoints" / "latest.json").is_file()
    # the collector on the CPU ticks eagerly, and the manifest says so
    tick = summary["runtime_manifest"]["collector_tick_cuda_graph"]
    assert tick == {"configured": None, "enabled": False, "active": False, "eager_reason": None,
                    "compiled": {"configured": None, "enabled": False},
                    "solver_early_exit": {"configured": False, "enabled": False}}


class _HostSyncOps(TorchDispatchMode):
    """Records the aten ops that read a value back to the host or copy Python data to the device: on
    CUDA each is a sync inside the tick, and inside a capture an error. On the CPU they run silently,
    so this spy is how the CPU suite guards the GPU tick."""

    OPS = ("aten.lift_fresh", "aten._local_scalar_dense", "aten.nonzero", "aten.masked_select", "aten.is_nonzero",
           "aten.item", "aten.unique", "aten._unique2", "aten.repeat_interleave")

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if str(func).startswith(self.OPS):
            self.seen.append(str(func))
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("task", ["pendulum_swingup", "g1_walk_flat", "g1_motion_tracking"])
@pytest.mark.parametrize("algo", ["sac", "flashsac"])
def test_tick_has_no_host_sync_ops(task, algo):
    """Four ticks, across auto-resets (3-step episodes): no op that would sync or break the capture.
    (Found so: a quaternion constant made with new_tensor, a vector filled in place, an index list.)"""
    cfg = load_config(algo, task, "mujoco", [*TINY_ALGO, "task.max_episode_steps=3"])
    tick = build_collector_tick(cfg, 3, "cpu", cuda_graph=False, replay_ticks=4)
    tick.run(0, 1)  # lazy state (held noise) is made on the first tick, as on the GPU before capture
    with _HostSyncOps() as spy:
        tick.run(1, 4)
    assert spy.seen == []


@pytest.mark.slow
def test_nan_guard_end_to_end_through_the_collector(tmp_path):
    """debug.nan_inject_step breaks env 0 at the collector's 6th env step: the run completes, counts the
    reset (Train/nan_resets), and the collector saves the first offending state once, to the run dir."""
    run = tmp_path / "run"
    p = run_duorl(run, "algo.max_iterations=12", "debug.nan_inject_step=5")
    assert p.returncode == 0, p.stderr
    summary = json.loads((run / "run_summary.json").read_text())
    assert summary["status"] == "completed"
    assert summary["nan_first_state"] == "nan_first_state.pt"
    dump = torch.load(run / "nan_first_state.pt", weights_only=False)
    assert dump["iteration"] == 5 and int(dump["env_index"]) == 0
    assert torch.isnan(dump["qvel_before"]).all()  # the broken state the bad step started from
    assert torch.isfinite(dump["action"]).all()
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["Train/nan_resets"] == 1.0


def test_nan_inject_step_refusal():
    with pytest.raises(ConfigError, match="debug.nan_inject_step"):
        load_config("sac", "pendulum_swingup", "mujoco", ["debug.nan_inject_step=-2"])
