"""The mean and population variance of every column of a batch, by a two-stage Triton reduction
(`algo.algo_params.batchnorm_stats_kernel`: FlashSAC's BatchNorm statistics where no gradient flows
through them).

    x [G, R, D] (or [R, D])  ->  mean, var [G, 1, D] (or [1, D]) over the R rows, float32

Why (benchmarks/2026-12-01_learner_ab_h200/round3/): torch.compile turned the critic's input BatchNorm
statistics (over [2 members, 4096 rows, 130 features], the rows being the concatenated current and
next batch) into one reduction kernel of 0.53 ms per call, 1.05 of the 4.0 ms the flashsac iteration
kept the GPU busy: an outer reduction over a few hundred columns gets too few programs to hide its
loads' latency. Here stage one gives every block of BLOCK_R rows x BLOCK_D columns its own program (the
block's mean and sum of squared deviations, exact in registers), and stage two merges the blocks of each
column (Chan et al.: M2 = sum M2_i + sum n_i (mean_i - mean)^2). Members that see the same rows (an
expanded input, stride 0) are reduced once.

An opaque `torch.library.custom_op` with a shape function and no autograd: callers use it only where x
needs no gradient (the input of a network; its BatchNorm affine still learns). Import this module only
where Triton is installed; the CPU path never calls it.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

_BLOCK_R = 64
_BLOCK_D = 32


@triton.jit
def batch_norm_stats_partial_kernel(X, MEAN_PART, M2_PART, R, D, P, stride_g, stride_r, stride_d,
                                    BLOCK_R: tl.constexpr, BLOCK_D: tl.constexpr):
    g = tl.program_id(0)
    pr = tl.program_id(1)
    cols = tl.program_id(2) * BLOCK_D + tl.arange(0, BLOCK_D)
    rows = pr * BLOCK_R + tl.arange(0, BLOCK_R)
    col_ok = cols < D
    ok = (rows < R)[:, None] & col_ok[None, :]
    x = tl.load(X + g.to(tl.int64) * stride_g + rows[:, None].to(tl.int64) * stride_r + cols[None, :] * stride_d,
                mask=ok, other=0.0).to(tl.float32)
    count = tl.minimum(R - pr * BLOCK_R, BLOCK_R).to(tl.float32)
    mean = tl.sum(x, axis=0) / count
    dev = tl.where(ok, x - mean[None, :], 0.0)
    part = (g * P + pr) * D + cols
    tl.store(MEAN_PART + part, mean, mask=col_ok)
    tl.store(M2_PART + part, tl.sum(dev * dev, axis=0), mask=col_ok)


@triton.jit
def batch_norm_stats_merge_kernel(MEAN_PART, M2_PART, MEAN, VAR, R, D,
                                  P: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_R: tl.constexpr,
                                  BLOCK_D: tl.constexpr):
    g = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    parts = tl.arange(0, BLOCK_P)
    col_ok = cols < D
    ok = (parts < P)[:, None] & col_ok[None, :]
    offs = (g * P + parts)[:, None] * D + cols[None, :]
    means = tl.load(MEAN_PART + offs, mask=ok, other=0.0)
    m2 = tl.load(M2_PART + offs, mask=ok, other=0.0)
    counts = tl.where(parts < P, tl.minimum(R - parts * BLOCK_R, BLOCK_R), 0).to(tl.float32)
    mean = tl.sum(means * counts[:, None], axis=0) / R
    spread = tl.where(ok, means - mean[None, :], 0.0)
    var = (tl.sum(m2, axis=0) + tl.sum(counts[:, None] * spread * spread, axis=0)) / R
    tl.store(MEAN + g * D + cols, mean, mask=col_ok)
    tl.store(VAR + g * D + cols, var, mask=col_ok)


@torch.library.custom_op("duorl::column_mean_var", mutates_args=())
def _column_mean_var_op(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean, var) [G, D] float32 over the rows of x [G, R, D] (any strides)."""
    g, r, d = x.shape
    p = triton.cdiv(r, _BLOCK_R)
    mean_part = torch.empty((g, p, d), dtype=torch.float32, device=x.device)
    m2_part = torch.empty((g, p, d), dtype=torch.float32, device=x.device)
    batch_norm_stats_partial_kernel[(g, p, triton.cdiv(d, _BLOCK_D))](
        x, mean_part, m2_part, r, d, p, x.stride(0), x.stride(1), x.stride(2), BLOCK_R=_BLOCK_R, BLOCK_D=_BLOCK_D)
    mean = torch.empty((g, d), dtype=torch.float32, device=x.device)
    var = torch.empty((g, d), dtype=torch.float32, device=x.device)
    batch_norm_stats_merge_kernel[(g, triton.cdiv(d, _BLOCK_D))](
        mean_part, m2_part, mean, var, r, d, P=p, BLOCK_P=triton.next_power_of_2(p), BLOCK_R=_BLOCK_R,
        BLOCK_D=_BLOCK_D)
    return mean, var


@_column_mean_var_op.register_fake
def _(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    g, _, d = x.shape
    return x.new_empty((g, d), dtype=torch.float32), x.new_empty((g, d), dtype=torch.float32)


def column_mean_var(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and population variance over dim -2 of x [R, D] or [G, R, D], kept as a dim of 1 (float32).
    x must need no gradient (the op has no backward)."""
    if x.requires_grad:
        raise ValueError("column_mean_var has no backward: use it where no gradient flows through the statistics")
    if x.dim() == 2:
        mean, var = _column_mean_var_op(x.unsqueeze(0))
        return mean, var
    if x.dim() != 3:
        raise ValueError(f"column_mean_var takes [R, D] or [G, R, D], got shape {tuple(x.shape)}")
    g = x.shape[0]
    if g > 1 and x.stride(0) == 0:  # every member sees the same rows: reduce them once
        mean, var = _column_mean_var_op(x[:1])
        return mean.unsqueeze(1).expand(g, 1, -1), var.unsqueeze(1).expand(g, 1, -1)
    mean, var = _column_mean_var_op(x)
    return mean.unsqueeze(1), var.unsqueeze(1)
