"""Whole-cycle CUDA graphs on the GPU (`pytest -m cuda`): graph replay is bitwise the eager iteration.

Every learner (SAC, FlashSAC, WarpSAC's age-biased sampler) runs side by side with an eager twin on
the real replay ring and sampler, static inputs refilled between iterations as the runtime does (the
replay window moves, normaliser statistics and reward scale change). Over 6 iterations (the first
captures, the other 5 only replay) losses, parameters, buffers and optimizer state stay bitwise
equal, and every parameter changes on every iteration. Changing a gradient hook, a gradient callback
or loading a checkpoint forces a recapture; side-stream work inside the cycle is forked and joined.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from duorl.algos.registry import make_learner
from duorl.config.schema import AlgoConfig, AlgoParamsConfig
from duorl.envs.base import EnvSpec
from duorl.gpu.graphs import WholeCycleGraph, forked_stream, materialize_optimizer_state
from duorl.runtime.replay import AgeBias, ReplayLayout, ReplayRing, ReplaySampler

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]

SPEC = EnvSpec(task="toy", actor_obs_dim=24, critic_obs_dim=30, action_dim=6, max_episode_steps=50, control_dt=0.02)
N_ENVS, TICKS = 64, 64
ITERATIONS = 6

CONFIGS = {  # torch_compile off unless a test asks (see _pair)
    "sac": AlgoConfig(
        name="sac", batch_size=512, actor_hidden_dims=[128, 64], critic_hidden_dims=[128, 64], num_atoms=51,
        updates_per_step=4, policy_frequency=2, use_autocast=True, obs_normalization=True,
        algo_params=AlgoParamsConfig(torch_compile=False),
    ),
    "flashsac": AlgoConfig(
        name="flashsac", batch_size=512, updates_per_step=2, policy_frequency=2, use_autocast=True,
        actor_hidden_dim=64, actor_num_blocks=2, critic_hidden_dim=128, critic_num_blocks=2, block_expansion=4,
        num_atoms=101, v_min=-5.0, v_max=5.0, weight_decay=0.0, alpha_init=0.01, obs_normalization=False,
        log_std_min=-10.0, log_std_max=2.0, max_iterations=100, lr_warmup_updates=3,
        algo_params=AlgoParamsConfig(torch_compile=False),
    ),
}
CONFIGS["warpsac"] = replace(CONFIGS["flashsac"], name="warpsac", decay_step=20, replay_min_weight=0.1)


class Replay:
    """A ring filled tick by tick like the collector does, and the runtime's sampler over it."""

    def __init__(self, device: torch.device, age_bias: AgeBias | None, packed: bool = False) -> None:
        self.ring = ReplayRing.allocate(
            ReplayLayout(N_ENVS, TICKS, SPEC.actor_obs_dim, SPEC.critic_obs_dim, SPEC.action_dim), device, packed=packed
        )
        g = torch.Generator(device=device).manual_seed(0)
        for tick in range(TICKS):
            def rnd(*shape: int) -> torch.Tensor:
                return torch.randn(*shape, generator=g, device=device)

            obs = {"actor": rnd(N_ENVS, SPEC.actor_obs_dim) * 2 + 1, "critic": rnd(N_ENVS, SPEC.critic_obs_dim)}
            nxt = {"actor": rnd(N_ENVS, SPEC.actor_obs_dim) * 2 + 1, "critic": rnd(N_ENVS, SPEC.critic_obs_dim)}
            self.ring.write(tick, obs, torch.tanh(rnd(N_ENVS, SPEC.action_dim)), rnd(N_ENVS), nxt,
                            (rnd(N_ENVS) > 1.5).float(), (rnd(N_ENVS) > 2.0).float())
        self.sampler = ReplaySampler(self.ring, torch.Generator(device=device).manual_seed(1), age_bias=age_bias)

    def feed(self, learner, k: int) -> None:
        """Static inputs of iteration k, refilled in place as the duo does: the window and new statistics."""
        lo, hi = 8 + 4 * k, 24 + 4 * k
        self.sampler.set_window(lo, hi)
        learner.observe(*self.ring.ticks_obs(hi - 4, hi))
        if hasattr(learner, "observe_rewards"):
            learner.observe_rewards(*self.ring.ticks_rewards(hi - 4, hi))


def _pair(algo: str, compiled: bool = False, levers: dict | None = None, **overrides):
    device = torch.device("cuda")
    cfg = replace(CONFIGS[algo], algo_params=AlgoParamsConfig(torch_compile=compiled, **(levers or {})), **overrides)
    packed = cfg.algo_params.packed_replay
    bias = AgeBias(cfg.decay_step, cfg.replay_min_weight, cfg.replay_num_buckets) if cfg.decay_step > 0 else None
    eager, graphed = make_learner(cfg, SPEC, device, 0), make_learner(cfg, SPEC, device, 0)
    assert eager.compiled == graphed.compiled == compiled
    # the graph materialises optimizer state before capturing (bitwise equal to lazy creation, see
    # tests/gpu/test_graphs.py); do the same for the eager twin so both hold the same state keys from the start
    for opt in eager.graph_optimizers():
        materialize_optimizer_state(opt)
    return cfg, eager, graphed, Replay(device, bias, packed), Replay(device, bias, packed)


def _state(learner) -> dict[str, torch.Tensor]:
    """Parameters, buffers (running statistics, schedules, reward scale) and optimizer state."""
    out: dict[str, torch.Tensor] = {}
    for i, m in enumerate(learner.graph_modules()):
        for k, v in m.state_dict().items():  # a module's extra state (FlashSAC's per-env returns) is a dict
            for kk, vv in (v.items() if isinstance(v, dict) else [("", v)]):
                out[f"m{i}.{k}.{kk}"] = vv.detach().clone()
    out["log_alpha"] = learner.log_alpha.detach().clone()
    for i, opt in enumerate(learner.graph_optimizers()):
        for j, p in enumerate(opt.param_groups[0]["params"]):
            for k, v in opt.state[p].items():
                out[f"opt{i}.{j}.{k}"] = v.clone()
        out[f"opt{i}.lr"] = opt.param_groups[0]["lr"].clone()
    return out


def _params(learner) -> list[torch.Tensor]:
    ps = [p.detach().clone() for m in learner.graph_modules() for p in m.parameters()]
    ps += [p.detach().clone() for p in learner.critic_target.parameters()]
    return ps + [learner.log_alpha.detach().clone()]


def _assert_bitwise(eager, graphed, me, mg, where: str) -> None:
    se, sg = _state(eager), _state(graphed)
    assert se.keys() == sg.keys()
    for k in se:
        assert torch.equal(se[k], sg[k]), f"{where}: {k} differs"
    assert me.keys() == mg.keys()
    for k in me:
        assert torch.equal(me[k], mg[k]), f"{where}: metric {k} differs"
    assert eager.num_updates == graphed.num_updates


@pytest.mark.parametrize(("algo", "compiled"), [
    ("sac", False), ("flashsac", False), ("warpsac", False), ("sac", True), ("flashsac", True),
])
def test_graph_matches_eager_bitwise_over_replays(algo: str, compiled: bool) -> None:
    graph = _replays_equal_eager(*_pair(algo, compiled))
    # one capture, then replays only
    assert graph.captures == 1 and graph.replays == ITERATIONS and graph.active
    assert graph.state()["cycles"] == 1


def _replays_equal_eager(cfg, eager, graphed, re, rg) -> WholeCycleGraph:
    """ITERATIONS iterations of the graph beside its eager twin: every parameter moves each time and both
    stay bitwise equal; the graph, for its counters."""
    graph = WholeCycleGraph(graphed, extra_generators=[rg.sampler.generator])
    n = cfg.updates_per_step
    for k in range(ITERATIONS):
        re.feed(eager, k)
        rg.feed(graphed, k)
        before = _params(graphed)
        mg = graph.train_iteration(rg.sampler.sample, n)
        me = eager.train_iteration(re.sampler.sample, n)
        torch.cuda.synchronize()
        moved = [not torch.equal(a, b) for a, b in zip(before, _params(graphed))]
        assert all(moved), f"iteration {k}: {moved.count(False)} parameter tensors did not change"
        _assert_bitwise(eager, graphed, me, mg, f"iteration {k}")
    return graph


# issue #41's switches, each learner's all on (benchmarks/2026-12-02_learner_round6_h200/)
LEVERS = {
    "sac": {"layer_norm_silu": "fused_bias", "gradients_by_copy": True, "packed_replay": True},
    "flashsac": {"batchnorm_stats_kernel": True, "gradients_by_copy": True, "packed_replay": True},
}


@pytest.mark.parametrize(("algo", "compiled", "levers"), [
    ("sac", True, LEVERS["sac"]), ("sac", False, {"layer_norm_silu": "fused"}), ("sac", True, {"layer_norm_silu": "fused"}),
    ("flashsac", True, LEVERS["flashsac"]), ("flashsac", False, LEVERS["flashsac"]),
])
def test_speed_levers_graph_matches_eager_bitwise(algo: str, compiled: bool, levers: dict) -> None:
    """The new kernels and paths inside the whole-cycle graph: replays equal eager iterations bitwise
    (deterministic kernels, no atomics), and the Triton kernels are among what the iteration launches."""
    cfg, eager, graphed, re, rg = _pair(algo, compiled, levers)
    graph = _replays_equal_eager(cfg, eager, graphed, re, rg)
    assert graph.captures == 1 and graph.replays == ITERATIONS
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        eager.train_iteration(re.sampler.sample, cfg.updates_per_step)
        torch.cuda.synchronize()
    names = {e.name for e in prof.events()}
    wanted = "layer_norm_silu_bwd_kernel" if algo == "sac" else "batch_norm_stats_partial_kernel"
    assert any(wanted in name for name in names), sorted(names)[:20]


@pytest.mark.parametrize(("algo", "compiled"), [("sac", True), ("flashsac", False)])
def test_a_graph_prepared_ahead_changes_nothing_and_is_replayed(algo: str, compiled: bool) -> None:
    """prepare() captures the first cycle before any data (the duo does it while its collector starts, on
    a window of one tick of the empty ring): the learner's state is left bitwise as it was, and the
    iterations that follow replay that graph and equal the eager twin's bitwise."""
    cfg, eager, graphed, re, rg = _pair(algo, compiled)
    graph = WholeCycleGraph(graphed, extra_generators=[rg.sampler.generator])
    n = cfg.updates_per_step
    before = _state(graphed)
    rg.sampler.set_window(0, 1)
    assert graph.prepare(rg.sampler.sample, n) and not graph.prepare(rg.sampler.sample, n)
    torch.cuda.synchronize()
    after = _state(graphed)
    assert all(torch.equal(before[k], after[k]) for k in before), [k for k in before if not torch.equal(before[k], after[k])]
    assert graph.captures == 1 and graph.replays == 0 and graphed.num_updates == eager.num_updates
    for k in range(3):
        re.feed(eager, k)
        rg.feed(graphed, k)
        mg = graph.train_iteration(rg.sampler.sample, n)
        me = eager.train_iteration(re.sampler.sample, n)
        torch.cuda.synchronize()
        _assert_bitwise(eager, graphed, me, mg, f"iteration {k}")
    assert graph.captures == 1 and graph.replays == 3


def test_each_cycle_key_gets_its_own_graph() -> None:
    # policy_frequency 4 with 2 updates per iteration: iterations alternate between two schedules
    cfg, eager, graphed, re, rg = _pair("sac", policy_frequency=4, updates_per_step=2)
    graph = WholeCycleGraph(graphed, extra_generators=[rg.sampler.generator])
    for k in range(ITERATIONS):
        re.feed(eager, k)
        rg.feed(graphed, k)
        mg = graph.train_iteration(rg.sampler.sample, 2)
        me = eager.train_iteration(re.sampler.sample, 2)
        torch.cuda.synchronize()
        _assert_bitwise(eager, graphed, me, mg, f"iteration {k}")
    assert graph.captures == 2 and graph.replays == ITERATIONS


@pytest.mark.parametrize(("algo", "compiled"), [("sac", False), ("flashsac", True)])
def test_hook_callback_and_checkpoint_changes_force_recapture(algo: str, compiled: bool) -> None:
    cfg, eager, graphed, re, rg = _pair(algo, compiled)
    graph = WholeCycleGraph(graphed, extra_generators=[rg.sampler.generator])
    n = cfg.updates_per_step
    k = 0

    def step(expect_captures: int) -> None:
        nonlocal k
        re.feed(eager, k)
        rg.feed(graphed, k)
        mg = graph.train_iteration(rg.sampler.sample, n)
        me = eager.train_iteration(re.sampler.sample, n)
        torch.cuda.synchronize()
        _assert_bitwise(eager, graphed, me, mg, f"iteration {k}")
        assert graph.captures == expect_captures, (k, graph.captures, graph.last_invalidation)
        k += 1

    step(1)
    step(1)
    # a gradient hook on one critic parameter, on both twins: the graph must include it
    hooks = [next(learner.critic.parameters()).register_hook(lambda g: g * 0.5) for learner in (eager, graphed)]
    step(2)
    step(2)
    for h in hooks:
        h.remove()
    step(3)
    # a gradient synchronizer working on a side stream, forked from and joined to the capture stream
    from duorl.algos.base import NullSynchronizer

    class ScaleOnSideStream(NullSynchronizer):
        def __init__(self) -> None:
            self.side = torch.cuda.Stream()

        def attach(self, groups, buffers=()):
            self.groups = {k: list(v) for k, v in groups.items()}

        def synchronize(self, group, loss):
            with forked_stream(self.side):
                for p in self.groups[group]:
                    p.grad.mul_(0.75)
            return None

        def fingerprint(self):
            return ("scale", 0.75)

    for learner in (eager, graphed):
        learner.set_synchronizer(ScaleOnSideStream())
    step(4)
    step(4)
    # a checkpoint load (through the CPU, as a resume does)
    state = {key: value for key, value in eager.state_dict().items()}
    import io

    buf = io.BytesIO()
    torch.save(state, buf)
    for learner in (eager, graphed):
        buf.seek(0)
        learner.load_state_dict(torch.load(buf, map_location="cpu", weights_only=False))
    step(5)
    step(5)


def test_capture_errors_are_actionable() -> None:
    """A host sync inside train_iteration fails the capture with the cause and the fix (own process:
    a failed capture must not disturb the other tests)."""
    src = Path(__file__).resolve().parents[2] / "src"
    code = textwrap.dedent(
        """
        import torch
        from dataclasses import replace
        from duorl.algos.flashsac.learner import FlashSACLearner
        from duorl.gpu.graphs import GraphCaptureError, WholeCycleGraph
        from tests.gpu.test_graphs_cuda import CONFIGS, SPEC, Replay

        class Syncing(FlashSACLearner):
            def train_iteration(self, sample, n):
                out = super().train_iteration(sample, n)
                print("critic loss", float(out["Loss/critic"]))  # a host read
                return out

        learner = Syncing(CONFIGS["flashsac"], SPEC, "cuda", 0)
        replay = Replay(torch.device("cuda"), None)
        replay.feed(learner, 0)
        graph = WholeCycleGraph(learner, extra_generators=[replay.sampler.generator])
        try:
            graph.train_iteration(replay.sampler.sample, 2)
        except GraphCaptureError as e:
            print("ERROR:", e)
        # after a failed capture the run ends (the runtime never falls back to eager); report whether
        # the process could still train eagerly with the same random generators
        try:
            out = learner.train_iteration(replay.sampler.sample, 2)
            print("EAGER AFTER FAILURE OK", torch.isfinite(out["Loss/critic"]).item())
        except Exception as e:
            print("EAGER AFTER FAILURE FAILED", type(e).__name__, e)
        """
    )
    import os

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), str(src.parent), os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env, cwd=src.parent)
    out = r.stdout + r.stderr
    assert "ERROR: capturing Syncing.train_iteration as a whole-cycle CUDA graph failed" in out, out[-3000:]
    assert "host synchronisation" in out and "whole_cycle_cuda_graph=false" in out, out[-3000:]
    print(out[-600:])
