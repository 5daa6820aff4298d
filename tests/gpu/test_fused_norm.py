"""gpu/fused_norm.py: the LayerNorm + SiLU kernels against float64 torch, forward and every gradient.

On the CPU they run under Triton's interpreter (skipped without Triton); the same checks run on a GPU
under `pytest -m cuda`. Fresh random inputs per case, outputs written into poisoned memory on CUDA.
Bounds (relative error, /work/.library/device/METHOD.md): fp32 well under 1e-5 (measured about 1e-7 on
the interpreter), bf16 activations under 1e-2 (measured about 3e-3: one bf16 rounding of y and dx);
the affine gradients are fp32 sums either way. Both backwards (`fused_norm.BACKWARD`: v1, v2 at its
configs) are checked, every output and partial buffer NaN-poisoned first (`fused_norm._POISON`) so an
element left unwritten fails.
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


# v2 at the sac widths (critic 768/384/192 for 2 members, actor 512/256/128 as plain [M, N] layers), and
# one member as [1, M, N]: rows few enough for the interpreter, several programs and partials each
V2_WIDTHS = [(2, 96, 768), (2, 128, 384), (2, 160, 192), (0, 64, 512), (0, 200, 256), (0, 256, 128), (1, 80, 768),
             (1, 96, 128)]
V2_CONFIGS = ["v2", "v2:2048:4:3"]


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
    monkeypatch.setattr(fused_norm, "_POISON", float("nan"))
    for spec in ("v1", "v2"):
        monkeypatch.setattr(fused_norm, "BACKWARD", fused_norm.parse_backward(spec))
        for case in CASES:
            _check(device, *case)


def _v2_widths(monkeypatch: pytest.MonkeyPatch, device: torch.device) -> None:
    """v2 at every sac width, G = 2 and 1, the bias folded or not, fp32 and bf16, poisoned outputs; at
    the default config and at one of 3 row blocks a program whose reduction walks several tiles."""
    from duorl.gpu import fused_norm

    monkeypatch.setattr(fused_norm, "_POISON", float("nan"))
    for spec in V2_CONFIGS:
        monkeypatch.setattr(fused_norm, "BACKWARD", fused_norm.parse_backward(spec))
        monkeypatch.setattr(fused_norm, "_REDUCE_BLOCK_P", 32 if spec == "v2" else 2)
        for g, m, n in V2_WIDTHS:
            for fold in (False, True):
                for dtype in (torch.float32, torch.bfloat16):
                    _check(device, g, m, n, fold, dtype)


def _v2_deterministic(monkeypatch: pytest.MonkeyPatch, device: torch.device) -> None:
    """Two v2 backwards of the same inputs are bitwise equal (partials added in a fixed order)."""
    from duorl.gpu import fused_norm

    monkeypatch.setattr(fused_norm, "BACKWARD", fused_norm.parse_backward("v2:2048:4:2"))
    monkeypatch.setattr(fused_norm, "_REDUCE_BLOCK_P", 4)
    gen = torch.Generator(device="cpu").manual_seed(7)
    x = (torch.randn(2, 150, 384, generator=gen) * 2).to(device, torch.bfloat16)
    w, b, ib = (torch.randn(2, 384, generator=gen).to(device) for _ in range(3))
    dy = torch.randn(2, 150, 384, generator=gen).to(device, torch.bfloat16)
    _, mean, rstd = fused_norm._layer_norm_silu_op(x, ib, w, b, 1e-5)
    first = fused_norm._layer_norm_silu_backward_op(dy, x, ib, w, b, mean, rstd, True)
    second = fused_norm._layer_norm_silu_backward_op(dy, x, ib, w, b, mean, rstd, True)
    for a, c in zip(first, second):
        assert a.numel() and torch.equal(a, c)


def test_backward_config_parses() -> None:
    pytest.importorskip("triton")
    from duorl.gpu import fused_norm

    assert fused_norm.parse_backward("v1") == fused_norm.BackwardConfig("v1")
    assert fused_norm.parse_backward("v2") == fused_norm.BackwardConfig("v2")
    assert fused_norm.parse_backward("v2:8192:16") == fused_norm.BackwardConfig("v2", 8192, 16, 1)
    for spec in fused_norm.V2_SWEEP:
        assert fused_norm.parse_backward(spec).spec() == spec
    for bad in ("v3", "v2:3000:8", "v2:4096:64:1", "v2:4096:8:0", "v2:a:b", "v1:4096:8"):
        with pytest.raises(ValueError, match="DUORL_LNSILU_BWD"):
            fused_norm.parse_backward(bad)


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


def test_v2_backward_matches_float64_at_the_sac_widths_on_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    device = kernels_device()
    if device.type == "cuda":
        pytest.skip("a GPU is visible: the CUDA test covers the kernels")
    _v2_widths(monkeypatch, device)
    _v2_deterministic(monkeypatch, device)


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
    _v2_widths(monkeypatch, device)
    _v2_deterministic(monkeypatch, device)
