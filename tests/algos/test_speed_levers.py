"""The learner-speed switches of issue #41 (algo.algo_params.*) on the CPU.

gradients_by_copy and packed_replay change how the same numbers are moved, not the numbers: a learner
trained with either is bitwise the default one. layer_norm_silu (sac) and batchnorm_stats_kernel
(flashsac) run Triton kernels, here through Triton's interpreter (skipped without Triton): the learner
trains as the default one does, to fp32 rounding. The GPU side (graph equals eager bitwise, compiled):
tests/gpu/test_graphs_cuda.py.
"""

from __future__ import annotations

import pytest
import torch

from duorl.cli.bench.learner import learner_fixture

SMALL = {
    "sac": ["training.num_envs=8", "algo.batch_size=32", "algo.updates_per_step=4", "algo.actor_hidden_dims=[16]",
            "algo.critic_hidden_dims=[24, 16]"],
    "flashsac": ["training.num_envs=8", "algo.batch_size=32", "algo.updates_per_step=4", "algo.actor_hidden_dim=16",
                 "algo.critic_hidden_dim=16", "algo.actor_num_blocks=1", "algo.critic_num_blocks=1", "algo.num_atoms=11"],
}


def _flat(x: object, out: dict[str, torch.Tensor], prefix: str = "") -> dict[str, torch.Tensor]:
    if isinstance(x, torch.Tensor):
        out[prefix] = x
    elif isinstance(x, dict):
        for k, v in x.items():
            _flat(v, out, f"{prefix}.{k}")
    elif isinstance(x, (list, tuple)):
        for i, v in enumerate(x):
            _flat(v, out, f"{prefix}.{i}")
    return out


def _trained(algo: str, *overrides: str, iterations: int = 3) -> dict[str, torch.Tensor]:
    fx = learner_fixture(algo, None, SMALL[algo] + list(overrides), "cpu", replay_ticks=4)
    learner, sampler = fx.setup()
    for _ in range(iterations):
        metrics = learner.train_iteration(sampler.sample, fx.num_updates)
    return _flat((learner.state_dict(), metrics), {})


@pytest.mark.parametrize("algo", ["sac", "flashsac"])
@pytest.mark.parametrize("switch", ["gradients_by_copy", "packed_replay"])
def test_moving_switches_train_bitwise_alike(algo: str, switch: str) -> None:
    base, other = _trained(algo), _trained(algo, f"algo.algo_params.{switch}=true")
    assert base.keys() == other.keys()
    assert [k for k in base if not torch.equal(base[k], other[k])] == []


@pytest.mark.parametrize(("algo", "override"), [
    ("sac", "algo.algo_params.layer_norm_silu=fused"),
    ("sac", "algo.algo_params.layer_norm_silu=fused_bias"),
    ("flashsac", "algo.algo_params.batchnorm_stats_kernel=true"),
])
def test_kernel_switches_train_as_the_default_does(algo: str, override: str) -> None:
    from tests.gpu.triton_util import kernels_device

    if kernels_device().type == "cuda":
        pytest.skip("a GPU is visible: tests/gpu/test_graphs_cuda.py covers the kernels there")
    base, other = _trained(algo, iterations=2), _trained(algo, override, iterations=2)
    assert base.keys() == other.keys()
    moved = [k for k in base if base[k].is_floating_point() and not torch.equal(base[k], other[k])]
    assert moved, "the kernels did not run"  # fp32 rounding differs somewhere when they did
    for k in moved:  # absolute slack for statistics of centred activations (means of order 1e-6)
        torch.testing.assert_close(other[k], base[k], rtol=1e-4, atol=1e-6, msg=k)
