"""gpu/fused_norm.py: the LayerNorm + SiLU kernels against float64 torch, forward and every gradient.

On the CPU they run under Triton's interpreter (skipped without Triton); the same checks run on a GPU
under `pytest -m cuda`. Fresh random inputs per case, outputs written into poisoned memory on CUDA.
Bounds (relative error, /work/.library/device/METHOD.md): fp32 well under 1e-5 (measured about 1e-7 on
the interpreter), bf16 activations under 1e-2 (measured about 3e-3: one bf16 rounding of y and dx);
the affine gradients are fp32 sums either way.
"""

from __future__ import annotations

import copy

import pytest
import torch

from tests.gpu.triton_util import kernels_device, relative_error

CASES = [  # members G (0: a plain [M, N] layer), rows M, features N, fold the bias, dtype
    (0, 37, 100, False, torch.float32),
    (2, 19, 192, True, torch.float32),
    (2, 70, 128, True, torch.bfloat16),
    (0, 24, 768, True, torch.bfloat16),
    (2, 300, 64, False, torch.float32),  # several row blocks per program (with _MAX_PARTIALS = 3)
]


def _check(device: torch.device, g: int, m: int, n: int, fold: bool, dtype: torch.dtype) -> None:
    from duorl.gpu import fused_norm

    gen = torch.Generator(device="cpu").manual_seed(g * 1000 + m + n)
    lead = (g,) if g else ()

    def rnd(*shape: int, scale: float = 1.0, shift: float = 0.0) -> torch.Tensor:
        return (torch.randn(*shape, generator=gen) * scale + shift).to(device)

    x = rnd(*lead, m, n, scale=3.0, shift=1.0).to(dtype).requires_grad_()
    w = rnd(*lead, n, scale=0.3, shift=1.0).requires_grad_()
    b = rnd(*lead, n, scale=0.2).requires_grad_()
    ib = rnd(*lead, n, scale=0.5).requires_grad_() if fold else None
    dy = rnd(*lead, m, n).to(dtype)
    leaves = [t for t in (x, w, b, ib) if t is not None]
    if device.type == "cuda":  # outputs land in memory a NaN fill just released
        torch.empty(64 * m * n + 4096, device=device).fill_(float("nan"))
    y = fused_norm.layer_norm_silu(x, w, b, 1e-5, in_bias=ib)
    grads = torch.autograd.grad(y, leaves, dy)
    assert y.shape == x.shape and y.dtype == dtype and bool(torch.isfinite(y).all())
    ref64 = [t.detach().double().requires_grad_() for t in leaves]
    ref = fused_norm.reference_layer_norm_silu(ref64[0], ref64[1], ref64[2], 1e-5, ref64[3] if fold else None)
    ref_grads = torch.autograd.grad(ref, ref64, dy.double())
    act_bound = 1e-2 if dtype == torch.bfloat16 else 1e-5
    assert relative_error(y, ref) < act_bound
    assert relative_error(grads[0], ref_grads[0]) < act_bound  # dx, in x's dtype
    for got, want in zip(grads[1:], ref_grads[1:]):  # weight, bias, folded bias: fp32 sums
        assert got.dtype == torch.float32 and bool(torch.isfinite(got).all())
        assert relative_error(got, want) < 1e-5


def _cases(monkeypatch: pytest.MonkeyPatch, device: torch.device) -> None:
    from duorl.gpu import fused_norm

    monkeypatch.setattr(fused_norm, "_MAX_PARTIALS", 3)
    for case in CASES:
        _check(device, *case)


def _stacks_agree(device: torch.device) -> None:
    """The fused sac networks compute what the plain ones do (fp32), gradients included."""
    from duorl.algos.sac.networks import CategoricalCriticEnsemble, TanhGaussianActor, fuse_layer_norm_silu

    torch.manual_seed(0)
    actor = TanhGaussianActor(10, 4, [32, 16], -5.0, 0.0, True).to(device)
    for head in (actor.mean_head, actor.log_std_head):
        torch.nn.init.normal_(head.weight, std=0.5)
        torch.nn.init.normal_(head.bias, std=0.3)
    critic = CategoricalCriticEnsemble(12, 4, [48, 24], 11, -5.0, 5.0).to(device)
    obs, obs_c, act = torch.randn(64, 10, device=device), torch.randn(64, 12, device=device), torch.rand(64, 4, device=device)
    for fold in (False, True):
        results = []
        for fuse in (False, True):
            a, c = copy.deepcopy(actor), copy.deepcopy(critic)
            if fuse:
                fuse_layer_norm_silu(a, fold)
                fuse_layer_norm_silu(c, fold)
            mean, log_std = a.distribution_params(obs)
            q = c(obs_c, act)
            params = list(a.parameters()) + list(c.parameters())
            grads = torch.autograd.grad(mean.square().sum() + log_std.sum() + q.square().sum(), params)
            results.append([mean, log_std, q, *grads])
        for fused, plain in zip(results[1], results[0]):
            assert relative_error(fused, plain) < 1e-5
        assert list(a.state_dict()) == list(actor.state_dict())


def test_kernels_match_float64_on_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    device = kernels_device()
    if device.type == "cuda":
        pytest.skip("a GPU is visible: the CUDA test covers the kernels")
    _cases(monkeypatch, device)
    _stacks_agree(device)


def test_compiled_forward_and_backward_equal_eager_on_the_cpu() -> None:
    """torch.compile traces the opaque ops (Dynamo and AOTAutograd, as on a GPU) and runs the same kernels."""
    device = kernels_device()
    if device.type == "cuda":
        pytest.skip("a GPU is visible: the graph tests compile on it")
    from duorl.algos.sac.networks import CategoricalCriticEnsemble, fuse_layer_norm_silu

    torch.manual_seed(1)
    critic = CategoricalCriticEnsemble(12, 4, [48, 24], 11, -5.0, 5.0)
    fuse_layer_norm_silu(critic, fold_bias=True)
    obs, act = torch.randn(64, 12), torch.rand(64, 4)

    def loss() -> torch.Tensor:
        return critic(obs, act).log_softmax(-1).square().mean()

    eager = torch.autograd.grad(loss(), list(critic.parameters()))
    compiled = torch.autograd.grad(torch.compile(loss, backend="aot_eager", fullgraph=True)(), list(critic.parameters()))
    for a, b in zip(compiled, eager):
        assert torch.equal(a, b)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_kernels_match_float64_on_the_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    device = kernels_device()
    _cases(monkeypatch, device)
    _stacks_agree(device)
