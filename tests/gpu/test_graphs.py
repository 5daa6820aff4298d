"""duorl.gpu.graphs on the CPU: what the whole-cycle graph relies on that needs no GPU.

The warm-up restore (in place, bitwise), optimizer-state materialisation (bitwise equal to lazy
initialisation), the staleness fingerprint (hooks, gradient callbacks, loads), and actionable errors.
Capture and replay themselves are tested on the GPU (tests/gpu/test_graphs_cuda.py).
"""

from __future__ import annotations


import pytest
import torch

from duorl.algos.base import NullSynchronizer
from duorl.algos.flashsac.learner import FlashSACLearner
from duorl.algos.sac.learner import SACLearner
from duorl.config.schema import AlgoConfig
from duorl.envs.base import EnvSpec
from duorl.gpu.graphs import GraphCaptureError, WholeCycleGraph, _Snapshot, graph_fingerprint, materialize_optimizer_state

from tests.algos.conftest import ToySampler

SPEC = EnvSpec(task="toy", actor_obs_dim=5, critic_obs_dim=7, action_dim=3, max_episode_steps=10, control_dt=0.02)
SAC_CFG = AlgoConfig(batch_size=32, actor_hidden_dims=[32], critic_hidden_dims=[32], num_atoms=21, v_min=-10.0,
                     v_max=10.0, policy_frequency=2)
FLASH_CFG = AlgoConfig(name="flashsac", batch_size=32, num_atoms=21, v_min=-5.0, v_max=5.0, policy_frequency=2,
                       actor_hidden_dim=16, actor_num_blocks=1, critic_hidden_dim=16, critic_num_blocks=1,
                       block_expansion=2, max_iterations=20)


class _CountingSync(NullSynchronizer):
    """A synchronizer that leaves gradients alone and counts the groups it saw."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def synchronize(self, group, loss):
        self.seen.append(group)
        return None

    def fingerprint(self):
        return ("counting",)


def _learner(kind: str, seed: int = 0):
    return SACLearner(SAC_CFG, SPEC, "cpu", seed) if kind == "sac" else FlashSACLearner(FLASH_CFG, SPEC, "cpu", seed)


def _state_tensors(module: torch.nn.Module) -> list[torch.Tensor]:
    """The tensors of a module's state_dict, those of its extra state (FlashSAC's per-env returns) included."""
    return [v for t in module.state_dict().values() for v in (t.values() if isinstance(t, dict) else [t])]


def _all_tensors(learner) -> list[torch.Tensor]:
    out = []
    for m in learner.graph_modules():
        out += [t.detach().clone() for t in _state_tensors(m)]
    for opt in learner.graph_optimizers():
        for st in opt.state.values():
            out += [v.clone() for v in st.values() if isinstance(v, torch.Tensor)]
        out += [g["lr"].clone() for g in opt.param_groups]
    return out


def _same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize("kind", ["sac", "flashsac"])
def test_warmup_restore_is_in_place_and_bitwise(kind: str) -> None:
    """The capture recipe on the CPU: materialise, snapshot, run warm-up iterations, restore in place;
    the next iteration is then bitwise that of a learner that never warmed up."""
    a, fresh = _learner(kind), _learner(kind)
    sa, sf = ToySampler(SPEC, seed=2), ToySampler(SPEC, seed=2)
    for learner in (a, fresh):
        learner.observe(torch.randn(16, 5, generator=torch.Generator().manual_seed(1)),
                        torch.randn(16, 7, generator=torch.Generator().manual_seed(2)))
    for opt in a.graph_optimizers():
        materialize_optimizer_state(opt)
    before = _all_tensors(a)
    ptrs = [t.data_ptr() for m in a.graph_modules() for t in _state_tensors(m)]
    opt_ptrs = [v.data_ptr() for opt in a.graph_optimizers() for st in opt.state.values() for v in st.values()]
    snap = _Snapshot(a, list(a.graph_generators()) + [sa.generator])
    for _ in range(2):
        a.train_iteration(sa, 2)
    assert not _same(before, _all_tensors(a)) and a.num_updates == 4
    snap.restore()
    assert _same(before, _all_tensors(a)) and a.num_updates == 0
    assert ptrs == [t.data_ptr() for m in a.graph_modules() for t in _state_tensors(m)]
    assert opt_ptrs == [v.data_ptr() for opt in a.graph_optimizers() for st in opt.state.values() for v in st.values()]
    for _ in range(2):
        ma, mf = a.train_iteration(sa, 2), fresh.train_iteration(sf, 2)
        assert all(torch.equal(ma[k], mf[k]) for k in ma)
    assert _same(_all_tensors(a), _all_tensors(fresh))


def test_materialised_adam_state_equals_lazy_initialisation() -> None:
    torch.manual_seed(0)
    for kwargs in ({}, {"amsgrad": True}, {"weight_decay": 0.1}):
        w1 = torch.nn.Parameter(torch.randn(5, 3))
        w2 = torch.nn.Parameter(w1.detach().clone())
        o1 = torch.optim.AdamW([w1], lr=torch.tensor(1e-2), **kwargs)
        o2 = torch.optim.AdamW([w2], lr=torch.tensor(1e-2), **kwargs)
        materialize_optimizer_state(o1)
        assert set(o1.state[w1]) >= {"step", "exp_avg", "exp_avg_sq"}
        for i in range(4):
            g = torch.randn(5, 3)
            w1.grad, w2.grad = g.clone(), g.clone()
            o1.step()
            o2.step()
        assert torch.equal(w1, w2)
        for k, v in o2.state[w2].items():
            assert torch.equal(o1.state[w1][k], v) and o1.state[w1][k].dtype == v.dtype, k


def test_materialise_refuses_optimizers_it_cannot_initialise() -> None:
    w = torch.nn.Parameter(torch.randn(3))
    opt = torch.optim.SGD([w], lr=0.1, momentum=0.9)
    w.grad = torch.ones(3)
    with pytest.raises(GraphCaptureError, match="whole_cycle_cuda_graph=false"):
        materialize_optimizer_state(opt)
    opt.step()  # once stepped, its state exists: nothing to do
    materialize_optimizer_state(opt)


@pytest.mark.parametrize("kind", ["sac", "flashsac"])
def test_the_first_observations_leave_a_prepared_graph_valid(kind: str) -> None:
    """The duo captures the first update before any data (runtime/duo.py `_prepare_first_update`), then
    feeds the first ticks' observations and rewards: nothing a graph depends on may change there, or
    the prepared capture is thrown away and made again (FlashSAC's per-env returns, sized by the first
    rewards, once did: two captures on the H200)."""
    learner = _learner(kind)
    for opt in learner.graph_optimizers():
        materialize_optimizer_state(opt)
    base = graph_fingerprint(learner)
    n, g = 6, torch.Generator().manual_seed(0)
    for _ in range(2):
        obs = {"actor": torch.randn(4, n, SPEC.actor_obs_dim, generator=g),
               "critic": torch.randn(4, n, SPEC.critic_obs_dim, generator=g)}
        learner.observe(obs["actor"], obs["critic"])
        if hasattr(learner, "observe_rewards"):
            learner.observe_rewards(torch.randn(4, n, generator=g), (torch.rand(4, n, generator=g) > 0.8).float())
        assert graph_fingerprint(learner) == base


@pytest.mark.parametrize("kind", ["sac", "flashsac"])
def test_fingerprint_sees_hooks_callbacks_and_loads(kind: str) -> None:
    learner = _learner(kind)
    sampler = ToySampler(SPEC)
    for opt in learner.graph_optimizers():
        materialize_optimizer_state(opt)
    base = graph_fingerprint(learner)
    learner.train_iteration(sampler, 2)
    assert graph_fingerprint(learner) == base  # training alone changes nothing a graph depends on

    param = next(learner.critic.parameters())
    handle = param.register_hook(lambda g: g * 1.0)
    assert graph_fingerprint(learner) != base  # a gradient hook
    handle.remove()
    assert graph_fingerprint(learner) == base  # gone again: the captured graph is right again

    handle = learner.actor.register_forward_hook(lambda m, i, o: None)
    assert graph_fingerprint(learner) != base  # a module hook
    handle.remove()
    handle = torch.nn.modules.module.register_module_forward_hook(lambda m, i, o: None)
    assert graph_fingerprint(learner) != base  # a global module hook
    handle.remove()

    null = learner.grad_sync
    learner.set_synchronizer(_CountingSync())
    assert graph_fingerprint(learner) != base  # another gradient synchronizer (e.g. a DP all-reduce)
    learner.set_synchronizer(null)
    assert graph_fingerprint(learner) == base

    param.data = param.data.clone()
    assert graph_fingerprint(learner) != base  # a parameter moved to new memory
    base = graph_fingerprint(learner)
    owner, name = next((m, n) for mod in learner.graph_modules() for m in mod.modules() for n, b in m._buffers.items()
                       if b is not None)
    setattr(owner, name, getattr(owner, name).clone())
    assert graph_fingerprint(learner) != base  # a buffer moved to new memory
    base = graph_fingerprint(learner)

    learner.load_state_dict(learner.state_dict())
    assert graph_fingerprint(learner) != base  # a checkpoint load


def test_whole_cycle_graph_needs_cuda_and_says_how_to_opt_out() -> None:
    if torch.cuda.is_available():
        pytest.skip("CUDA present: tests/gpu/test_graphs_cuda.py covers the graph")
    with pytest.raises(GraphCaptureError, match="needs a CUDA device.*whole_cycle_cuda_graph=false"):
        WholeCycleGraph(_learner("sac"))


@pytest.mark.parametrize("message, cause", [
    ("CUDA error: operation not permitted when stream is capturing", "a host synchronisation"),
    # an earlier operation broke the capture silently; a host read is the usual one
    ("CUDA error: operation failed due to a previous error during capture", "a host synchronisation"),
    ("operation would make the legacy stream depend on a capturing blocking stream; capture invalidated",
     "a host synchronisation"),
    ("Capture must end on the same stream it began on: unjoined work", "a side stream used inside the cycle"),
    ("CUDA out of memory. Tried to allocate 2.00 GiB", "not enough GPU memory"),
])
def test_capture_failures_name_their_likely_cause(message: str, cause: str) -> None:
    from duorl.gpu.graphs import _explain

    text = _explain("Learner", RuntimeError(message))
    assert f"Likely cause: {cause}" in text and "whole_cycle_cuda_graph=false" in text, text
    assert message.splitlines()[0] in text


def test_the_fingerprints_module_walk_is_modules_order() -> None:
    """graphs._module_tree (the staleness check's walk, without dotted names) visits what
    Module.modules() visits, in the same order, a shared submodule once."""
    from torch import nn

    from duorl.gpu.graphs import _module_tree

    shared = nn.Linear(2, 2)
    root = nn.Sequential(shared, nn.Sequential(shared, nn.ReLU(), nn.Sequential(nn.Tanh())), nn.Identity())
    assert [id(m) for m in _module_tree(root)] == [id(m) for m in root.modules()]
    assert len(_module_tree(root)) == 7
