"""Matrix products on shapes that tensor cores take at full speed: feature dims padded with zeros to a
multiple of 8 at the call.

cuBLAS runs a bf16 GEMM on Hopper's fast kernels only when every leading dimension is a multiple of 8
elements (16 bytes); with G1's 98 actor inputs, 130 critic inputs (101 + 29 actions), 29 actions and
101 atoms it falls back to Ampere-era kernels of 1- or 2-element alignment
(benchmarks/2026-12-01_learner_profile_h200/). Padding the input features and the weights with zeros
adds exact zeros to every sum, and padded outputs are sliced off, so the parameters (and checkpoints)
keep their shapes. Applied to CUDA tensors only: on the CPU the padding would be a copy that buys nothing.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

ALIGN = 8


def aligned(n: int) -> int:
    """n rounded up to a multiple of ALIGN."""
    return -(-n // ALIGN) * ALIGN


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, pad: bool | None = None) -> torch.Tensor:
    """F.linear(x, weight [out, in], bias [out]) with in and out padded to multiples of ALIGN (`pad`:
    default on CUDA tensors)."""
    out_dim, in_dim = weight.shape
    pk, pn = aligned(in_dim) - in_dim, aligned(out_dim) - out_dim
    if not (x.is_cuda if pad is None else pad) or not (pk or pn):
        return F.linear(x, weight, bias)
    if pk:
        x, weight = F.pad(x, (0, pk)), F.pad(weight, (0, pk))
    if pn:
        weight = F.pad(weight, (0, 0, 0, pn))
        bias = F.pad(bias, (0, pn)) if bias is not None else None
    y = F.linear(x, weight, bias)
    return y[..., :out_dim] if pn else y


def member_matmul(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
                  pad: bool | None = None) -> torch.Tensor:
    """Per-member x [n, B, in] @ weight [n, in, out] (+ bias [n, out]), in and out padded to multiples of
    ALIGN (`pad`: default on CUDA tensors)."""
    in_dim, out_dim = weight.shape[-2:]
    pk, pn = aligned(in_dim) - in_dim, aligned(out_dim) - out_dim
    if (x.is_cuda if pad is None else pad) and (pk or pn):
        if pk:
            x, weight = F.pad(x, (0, pk)), F.pad(weight, (0, 0, 0, pk))
        if pn:
            weight = F.pad(weight, (0, pn))
            bias = F.pad(bias, (0, pn)) if bias is not None else None
    # baddbmm, although compiled it first copies the broadcast bias into its output (a strided copy,
    # 1.8 ms of a sac iteration): as a separate add the bias fuses into LayerNorm's kernel, which then
    # reads and keeps an fp32 input and runs as a two-pass reduction, and the iteration measured slower
    # (benchmarks/2026-12-01_learner_ab_h200/README.md)
    y = torch.bmm(x, weight) if bias is None else torch.baddbmm(bias.unsqueeze(1), x, weight)
    return y[..., :out_dim] if y.shape[-1] != out_dim else y


class AlignedLinear(nn.Linear):
    """nn.Linear (same parameters, same state_dict) whose product runs on aligned shapes on CUDA."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias)

    def unbiased(self, x: torch.Tensor) -> torch.Tensor:
        """The product without the bias (a fused norm after it adds the bias)."""
        return linear(x, self.weight)
