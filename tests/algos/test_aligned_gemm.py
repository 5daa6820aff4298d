"""algos/aligned_gemm.py: the padded products equal the plain ones (values and gradients), keep the
parameters' shapes, and leave CPU tensors on the plain path."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from duorl.algos.aligned_gemm import AlignedLinear, aligned, linear, member_matmul


def test_aligned() -> None:
    assert [aligned(n) for n in (1, 8, 29, 98, 101, 130, 768)] == [8, 8, 32, 104, 104, 136, 768]


def test_padded_linear_equals_plain_with_gradients() -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 98, generator=g, dtype=torch.float64, requires_grad=True)
    w = torch.randn(29, 98, generator=g, dtype=torch.float64, requires_grad=True)
    b = torch.randn(29, generator=g, dtype=torch.float64, requires_grad=True)
    y = linear(x, w, b, pad=True)
    ref = F.linear(x, w, b)
    assert y.shape == ref.shape == (64, 29)
    torch.testing.assert_close(y, ref, rtol=0, atol=1e-12)
    grads = torch.autograd.grad(y.square().sum(), (x, w, b))
    ref_grads = torch.autograd.grad(ref.square().sum(), (x, w, b))
    for a, r in zip(grads, ref_grads):
        assert a.shape == r.shape
        torch.testing.assert_close(a, r, rtol=0, atol=1e-10)


def test_padded_member_matmul_equals_baddbmm_with_gradients() -> None:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 32, 130, generator=g, dtype=torch.float64, requires_grad=True)
    w = torch.randn(2, 130, 101, generator=g, dtype=torch.float64, requires_grad=True)
    b = torch.randn(2, 101, generator=g, dtype=torch.float64, requires_grad=True)
    y = member_matmul(x, w, b, pad=True)
    ref = torch.baddbmm(b.unsqueeze(1), x, w)
    assert y.shape == ref.shape == (2, 32, 101)
    torch.testing.assert_close(y, ref, rtol=0, atol=1e-11)
    for a, r in zip(torch.autograd.grad(y.sum(), (x, w, b)), torch.autograd.grad(ref.sum(), (x, w, b))):
        torch.testing.assert_close(a, r, rtol=0, atol=1e-10)
    # no bias, as FlashSAC's unit-norm layers use it
    torch.testing.assert_close(member_matmul(x, w, pad=True), torch.bmm(x, w), rtol=0, atol=1e-11)


def test_aligned_linear_is_nn_linear_on_the_cpu() -> None:
    torch.manual_seed(3)
    a = AlignedLinear(98, 29)
    torch.manual_seed(3)
    ref = torch.nn.Linear(98, 29)
    # the same initial draw and state_dict (checkpoints keep their shapes), the same output bitwise
    assert a.state_dict().keys() == ref.state_dict().keys()
    assert all(torch.equal(a.state_dict()[k], ref.state_dict()[k]) for k in ref.state_dict())
    x = torch.randn(16, 98)
    assert torch.equal(a(x), ref(x))
