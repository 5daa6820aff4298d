"""GPU checks for the SAC learner (run with `pytest -m cuda` on a CUDA machine).

Beyond the eager CUDA path (bf16 autocast, fused AdamW with tensor learning rates, CUDA generator), this captures one
whole `train_iteration` in a CUDA graph and checks replays against eager iterations bitwise: the
evidence that the update is graph-friendly, for the later whole-cycle graph issue.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from duorl.algos.base import Batch
from duorl.algos.sac.learner import METRIC_KEYS, SACLearner
from duorl.config.schema import AlgoConfig, AlgoParamsConfig
from duorl.envs.base import EnvSpec

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]

SPEC = EnvSpec(task="toy", actor_obs_dim=24, critic_obs_dim=30, action_dim=6, max_episode_steps=10, control_dt=0.02)
# the eager networks (torch.compile off): tests/gpu/test_graphs_cuda.py covers the compiled ones
CFG = AlgoConfig(
    batch_size=512, actor_hidden_dims=[128, 64], critic_hidden_dims=[128, 64], num_atoms=51,
    updates_per_step=4, policy_frequency=2, max_grad_norm=1.0, use_autocast=True,
    algo_params=AlgoParamsConfig(torch_compile=False),
)


class GpuSampler:
    """Static replay on the GPU; indices from its own CUDA generator (no host sync)."""

    def __init__(self, device: torch.device, size: int = 4096, seed: int = 0) -> None:
        g = torch.Generator(device=device).manual_seed(seed)
        s = SPEC

        def rnd(*shape: int) -> torch.Tensor:
            return torch.randn(*shape, generator=g, device=device)

        self.data = [
            rnd(size, s.actor_obs_dim), rnd(size, s.critic_obs_dim), torch.tanh(rnd(size, s.action_dim)),
            rnd(size), rnd(size, s.actor_obs_dim), rnd(size, s.critic_obs_dim), (rnd(size) > 1.2).float(),
        ]
        self.size = size
        self.generator = torch.Generator(device=device).manual_seed(seed + 1)

    def __call__(self, batch_size: int) -> Batch:
        idx = torch.randint(0, self.size, (batch_size,), generator=self.generator, device=self.data[0].device)
        return Batch(*(d[idx] for d in self.data))


def _flat_state(learner: SACLearner) -> list[torch.Tensor]:
    tensors = [p.detach().clone() for p in learner.actor.parameters()]
    tensors += [p.detach().clone() for p in learner.critic.parameters()]
    tensors += [p.detach().clone() for p in learner.critic_target.parameters()]
    tensors += [learner.log_alpha.detach().clone()]
    return tensors


def test_eager_cuda_iteration_trains_under_autocast() -> None:
    device = torch.device("cuda")
    learner = SACLearner(CFG, SPEC, device, seed=0)
    sampler = GpuSampler(device)
    learner.observe(sampler.data[0], sampler.data[1])
    before = _flat_state(learner)
    metrics = learner.train_iteration(sampler, CFG.updates_per_step)
    assert tuple(metrics) == METRIC_KEYS
    assert all(v.device.type == "cuda" and torch.isfinite(v) for v in metrics.values())
    assert all(not torch.equal(a, b) for a, b in zip(before, _flat_state(learner)))
    assert learner.actor_optimizer.param_groups[0]["fused"]


@pytest.mark.parametrize("autocast", [True, False])
def test_graph_replay_matches_eager_bitwise(autocast: bool) -> None:
    device = torch.device("cuda")
    cfg = replace(CFG, use_autocast=autocast)
    eager, graphed = SACLearner(cfg, SPEC, device, seed=0), SACLearner(cfg, SPEC, device, seed=0)
    s_eager, s_graph = GpuSampler(device), GpuSampler(device)
    n = cfg.updates_per_step  # a multiple of policy_frequency: every iteration has the same schedule

    # eager warm-up on a side stream (same work for both, so both stay in the same state)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            eager.train_iteration(s_eager, n)
            graphed.train_iteration(s_graph, n)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()

    graph = torch.cuda.CUDAGraph()
    graph.register_generator_state(graphed.generator)
    graph.register_generator_state(s_graph.generator)
    with torch.cuda.graph(graph):
        static_metrics = graphed.train_iteration(s_graph, n)
    torch.cuda.synchronize()

    for _ in range(4):
        before = _flat_state(graphed)
        graph.replay()
        expect = eager.train_iteration(s_eager, n)
        torch.cuda.synchronize()
        after = _flat_state(graphed)
        assert all(not torch.equal(a, b) for a, b in zip(before, after)), "a replay left a parameter unchanged"
        for a, b in zip(after, _flat_state(eager)):
            assert torch.equal(a, b)
        for k in METRIC_KEYS:
            assert torch.equal(static_metrics[k], expect[k]), k


def test_checkpoint_through_cpu_continues_bitwise_on_cuda() -> None:
    import io

    device = torch.device("cuda")
    a, sampler = SACLearner(CFG, SPEC, device, seed=0), GpuSampler(device)
    for _ in range(2):
        a.train_iteration(sampler, 3)  # 6 updates, policy_frequency 2
    buf = io.BytesIO()
    torch.save(a.state_dict(), buf)
    sampler_state = sampler.generator.get_state()
    expect = [a.train_iteration(sampler, 3) for _ in range(2)]

    b = SACLearner(CFG, SPEC, device, seed=7)
    lr = b.actor_optimizer.param_groups[0]["lr"]
    buf.seek(0)
    b.load_state_dict(torch.load(buf, map_location="cpu", weights_only=False))
    assert b.actor_optimizer.param_groups[0]["lr"] is lr and lr.device.type == "cuda"
    sampler.generator.set_state(sampler_state)
    got = [b.train_iteration(sampler, 3) for _ in range(2)]
    for me, mg in zip(expect, got):
        assert all(torch.equal(me[k], mg[k]) for k in METRIC_KEYS)
    assert all(torch.equal(x, y) for x, y in zip(_flat_state(a), _flat_state(b)))
