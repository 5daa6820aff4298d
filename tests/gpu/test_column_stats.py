"""gpu/column_stats.py: the two-stage BatchNorm statistics against float64 torch (population variance).

On the CPU under Triton's interpreter (skipped without Triton); on a GPU under `pytest -m cuda`.
fp32 relative error well under 1e-5 (measured about 1e-7 on the interpreter).
"""

from __future__ import annotations

import pytest
import torch

from tests.gpu.triton_util import kernels_device, relative_error

SHAPES = [(4096, 98), (2, 300, 130), (1, 65, 7), (3, 64, 33)]


def _check(device: torch.device) -> None:
    from duorl.gpu.column_stats import column_mean_var

    gen = torch.Generator().manual_seed(0)
    cases = [torch.randn(shape, generator=gen) * 3.0 + 10.0 for shape in SHAPES]
    shared = torch.randn(300, 130, generator=gen) + 5.0
    cases.append(shared.unsqueeze(0).expand(2, -1, -1))  # members that see the same rows (stride 0)
    cases.append(torch.randn(130, 2, 300, generator=gen).permute(1, 2, 0))  # any strides
    for x in cases:
        x = x.to(device)
        if device.type == "cuda":
            torch.empty(1 << 22, device=device).fill_(float("nan"))
        mean, var = column_mean_var(x)
        ref_var, ref_mean = torch.var_mean(x.double(), dim=-2, unbiased=False, keepdim=True)
        assert mean.shape == ref_mean.shape and var.shape == ref_var.shape
        assert mean.dtype == var.dtype == torch.float32
        assert bool(torch.isfinite(mean).all() and torch.isfinite(var).all())
        assert relative_error(mean, ref_mean) < 1e-5 and relative_error(var, ref_var) < 1e-5
    with pytest.raises(ValueError, match="no backward"):
        column_mean_var(torch.randn(8, 3, device=device, requires_grad=True))


def test_statistics_match_float64_on_the_cpu() -> None:
    device = kernels_device()
    if device.type == "cuda":
        pytest.skip("a GPU is visible: the CUDA test covers the kernels")
    _check(device)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_statistics_match_float64_on_the_gpu() -> None:
    _check(kernels_device())
