"""GPU-only checks of the collector tick as one CUDA graph (run with `pytest -m cuda` on the GPU machine)."""

import json

import pytest
import torch

from duorl.cli.bench.collector import build_collector_tick
from duorl.cli.configure import load_config
from duorl.envs.registry import make_vec_env
from tests.envs.compile_util import step_compiled_vs_plain
from tests.conftest import run_duorl

pytestmark = pytest.mark.cuda

SMALL = ["algo.actor_hidden_dims=[64,64]", "algo.critic_hidden_dims=[64,64]", "algo.num_atoms=11"]
# Two G1 trajectories that should be the same part by float rounding that contacts amplify (MuJoCo Warp
# adds contact forces with atomics, in any order): on the H200 a captured and an eager g1_walk_flat tick
# differed by 2.2e-4 (relative 8.5e-4) in 1 of 2,048 rewards within 5 ticks (2026-11-29,
# benchmarks/2026-11-29_solver_early_exit_h200/pytest_tick_cuda.log). A broken replay (a stale buffer,
# a generator out of step) moves whole rows by far more.
CONTACT_TOL = 1e-3


def _pair(algo: str, task: str, n: int, *extra: str, compile: bool = False, compile_eager: bool = False,
          eval_envs: int = 0):
    """An eager tick and a captured one (their envs' tensor code compiled when `compile_eager` and
    `compile`; the last `eval_envs` envs acting deterministically in both)."""
    cfg = load_config(algo, task, "mjwarp", [*SMALL, "training.devices=[0]", *extra])
    eager = build_collector_tick(cfg, n, "cuda", cuda_graph=False, seed=3, compile=compile_eager, eval_envs=eval_envs)
    graphed = build_collector_tick(cfg, n, "cuda", cuda_graph=True, seed=3, compile=compile, eval_envs=eval_envs)
    return eager, graphed


def _assert_same(eager, graphed, exact: bool) -> None:
    for key in eager.ring.t:
        a, b = eager.ring.t[key], graphed.ring.t[key]
        if exact or key == "tick":
            assert torch.equal(a, b), key
        else:
            torch.testing.assert_close(a, b, atol=CONTACT_TOL, rtol=CONTACT_TOL, msg=lambda m, key=key: f"{key}: {m}")
    for key in eager.obs:
        if exact:
            assert torch.equal(eager.obs[key], graphed.obs[key]), key
    assert eager.sums.result()["episodes"] == graphed.sums.result()["episodes"]


@pytest.mark.parametrize("algo", ["sac", "flashsac"])
def test_graph_tick_equals_eager_tick_pendulum(algo):
    """20 ticks across two auto-resets (7-step episodes): bitwise the same replay rows, observations and
    episode counts, so the generators registered with the graph draw what eager ticks draw."""
    eager, graphed = _pair(algo, "pendulum_swingup", 256, "task.max_episode_steps=7")
    eager.run(0, 20)
    graphed.run(0, 20)
    torch.cuda.synchronize()
    assert graphed.captured and not eager.captured
    _assert_same(eager, graphed, exact=True)
    assert eager.sums.result()["episodes"] == 2 * 256


def test_graph_tick_with_eval_envs_equals_eager_tick():
    """training.eval_envs inside the capture: 64 of 256 envs take the policy's own action in the replayed
    graph as in eager ticks (bitwise), and both sum the two groups' episodes apart."""
    eager, graphed = _pair("sac", "pendulum_swingup", 256, "task.max_episode_steps=7", eval_envs=64)
    eager.run(0, 20)
    graphed.run(0, 20)
    torch.cuda.synchronize()
    assert graphed.captured
    _assert_same(eager, graphed, exact=True)
    a, b = eager.sums.result(), graphed.sums.result()
    assert a == b
    assert a["episodes"] == 2 * 192 and a["eval_episodes"] == 2 * 64


def test_graph_tick_equals_eager_tick_g1_walk():
    """The contact-rich task (MuJoCo Warp joins the capture; fixed solver iterations) over an episode
    end. Contact physics may add in a different order run to run, so values compare to CONTACT_TOL."""
    eager, graphed = _pair("sac", "g1_walk_flat", 128, "task.max_episode_steps=5")
    eager.run(0, 12)
    graphed.run(0, 12)
    torch.cuda.synchronize()
    assert graphed.captured
    _assert_same(eager, graphed, exact=False)
    assert torch.isfinite(graphed.ring.t["obs_actor"]).all()


def test_capacity_overflow_is_flagged_inside_the_captured_tick(monkeypatch):
    """njmax 48 (a robot on both feet needs about 113 rows): MuJoCo Warp's overflow bits, cleared and
    read by torch ops inside the replayed graph, flag the worlds, and the NaN guard resets and counts
    them as it does in eager ticks (the counts may differ by contact rounding, not by a stale flag)."""
    from duorl.envs.tasks.g1_common import G1TaskBase

    monkeypatch.setattr(G1TaskBase, "mjwarp_put_data_kwargs", {"nconmax": 64, "njmax": 48})
    eager, graphed = _pair("sac", "g1_walk_flat", 128, "task.max_episode_steps=50")
    eager.run(0, 12)
    graphed.run(0, 12)
    torch.cuda.synchronize()
    assert graphed.captured
    e, g = eager.sums.result()["nan_resets"], graphed.sums.result()["nan_resets"]
    assert g > 0 and e > 0
    assert abs(g - e) <= 0.25 * e and g < 128 * 12  # not a flag stuck on or off
    d = graphed.env.backend.diverged
    assert torch.equal(d, graphed.env.backend._overflow != 0)
    assert bool(graphed.env.nan_snapshot.taken)


@pytest.mark.parametrize("task", ["g1_walk_flat", "g1_motion_tracking"])
def test_compiled_graph_tick_equals_compiled_eager_tick_g1(task):
    """sim.tick_compile inside the capture: the captured tick replays the compiled kernels an eager
    compiled tick runs (to CONTACT_TOL, as for the plain pair above), over two episode ends with their resets.
    8 ticks of 3-step episodes: on the H200 (2026-11-29, benchmarks/2026-11-29_tick_profile_h200/) 12 ticks
    of 5-step episodes let contacts amplify rounding in g1_motion_tracking past 1e-4 (1 value of
    327,680, off by 1.12e-4); a shorter horizon still replays the capture six times across resets."""
    eager, graphed = _pair("sac", task, 128, "task.max_episode_steps=3", compile=True, compile_eager=True)
    assert graphed.env.compiled and eager.env.compiled
    eager.run(0, 8)
    graphed.run(0, 8)
    torch.cuda.synchronize()
    assert graphed.captured
    _assert_same(eager, graphed, exact=False)


@pytest.mark.parametrize("task", ["g1_walk_flat", "g1_motion_tracking"])
def test_compiled_step_equals_plain_step_from_the_same_state(task):
    """The compiled step tensor code computes what the plain code computes, checked step by step from
    one snapshot on MuJoCo Warp (tests/envs/compile_util.py says why not along a trajectory: the
    H200 run of 2026-11-29 saw a compiled and a plain g1_motion_tracking trajectory part by more than
    1e-4 within 12 ticks, as contacts amplify rounding)."""
    cfg = load_config("sac", task, "mjwarp", [*SMALL, "training.devices=[0]", "task.max_episode_steps=5"])
    env = make_vec_env(cfg.task, cfg.sim, 128, "cuda:0", seed=3, compile=True)
    env.reset()
    g = torch.Generator(device="cuda").manual_seed(0)
    done = 0
    for _ in range(12):
        a = torch.rand(env.num_envs, env.spec.action_dim, generator=g, device="cuda") * 2 - 1
        done += step_compiled_vs_plain(env, a)[0]
    assert done >= 2 * env.num_envs


def test_solver_early_exit_tick_equals_fixed_iteration_tick_g1():
    """sim.solver_early_exit: MuJoCo Warp's solver loop as a conditional while-node of torch's tick
    graph (warp_conditional.JoinedSolverLoop) computes what the fixed iterations compute (to CONTACT_TOL,
    as contacts add in any order), over two episode ends, and the capture holds one loop body per substep."""
    cfg = load_config("sac", "g1_walk_flat", "mjwarp", [*SMALL, "training.devices=[0]", "task.max_episode_steps=3"])
    fixed = build_collector_tick(cfg, 128, "cuda", cuda_graph=True, seed=3, solver_early_exit=False)
    early = build_collector_tick(cfg, 128, "cuda", cuda_graph=True, seed=3, solver_early_exit=True)
    fixed.run(0, 8)
    early.run(0, 8)
    torch.cuda.synchronize()
    assert fixed.captured and early.captured
    assert len(early.env.backend._solver_loop.body_captures) == early.env.task.substeps
    assert fixed.env.backend._solver_loop is None
    _assert_same(fixed, early, exact=False)
    assert torch.isfinite(early.ring.t["obs_actor"]).all()


def test_replayed_ticks_do_not_sync_with_the_host():
    _, graphed = _pair("sac", "g1_walk_flat", 64, compile=True)
    graphed.run(0, 2)  # eager first tick and capture
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        graphed.run(2, 10)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
    assert int(graphed.tick) == 12


def test_a_cuda_run_replays_captured_ticks_and_says_so(tmp_path):
    run = tmp_path / "run"
    p = run_duorl(run, "training.devices=[0]", "algo.max_iterations=30", "training.num_envs=64", sim="mjwarp")
    assert p.returncode == 0, p.stderr
    summary = json.loads((run / "run_summary.json").read_text())
    assert summary["runtime_manifest"]["collector_tick_cuda_graph"] == {
        "configured": None, "enabled": True, "active": True, "compiled": {"configured": None, "enabled": True},
        "solver_early_exit": {"configured": False, "enabled": False}}
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert any("Perf/collector_tick_ms" in r for r in rows)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs a second GPU")
def test_a_run_on_the_second_gpu_captures_both_graphs_there(tmp_path):
    """training.devices=[1]: the learner's whole-cycle graph and the collector's tick graph are
    captured on cuda:1 (the H200 run of 2026-11-29 on devices=[1] captured an empty learner graph on
    cuda:0's stream and failed: the learner process had not made cuda:1 its current device)."""
    run = tmp_path / "run"
    p = run_duorl(run, "training.devices=[1]", "algo.max_iterations=30", "training.num_envs=64", sim="mjwarp")
    assert p.returncode == 0, p.stderr
    manifest = json.loads((run / "run_summary.json").read_text())["runtime_manifest"]
    assert manifest["env_device"] == "cuda:1"
    assert manifest["whole_cycle_cuda_graph"]["active"] is True
    assert manifest["collector_tick_cuda_graph"]["active"] is True
