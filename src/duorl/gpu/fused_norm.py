"""LayerNorm + SiLU as one Triton kernel forward and one backward, for the FastSAC blocks
Linear -> LayerNorm -> SiLU (`algo.algo_params.fused_norm_silu`).

    y = silu(LayerNorm(x + in_bias) * weight + bias)          x [G, M, N], parameters [G, N]

G is the ensemble (the twin critics' members; 1 for the actor), M the rows, N the features. The
optional `in_bias` is the preceding linear map's bias, folded in so that the product runs without it
(`algo.algo_params.fold_bias_into_norm`: compiled `baddbmm` first copies the broadcast bias into its
output, benchmarks/2026-12-01_learner_ab_h200/).

Why a kernel of our own (benchmarks/2026-12-01_learner_ab_h200/sac_sym_new.json): torch.compile's
backward of these blocks recomputes the statistics and loops over each row several times (the
[2, 16384, 768] layer: 112 us, about 1.3 TB/s), and reduces the affine gradients over the rows in a
second kernel that reads the input again (63 us). Here a row fits in registers (N <= 4096): the forward
reads x once and writes y (bf16 under autocast) plus each row's mean and 1/std; the backward reads x and
dy once, writes dx, and keeps the affine gradients as per-program partial sums, added up afterwards in
a fixed order (no atomics: graph and eager runs stay bitwise equal).

Two backwards, chosen by `DUORL_LNSILU_BWD` (read at import; `BACKWARD` may be set at run time):
`v1` (the default, measured: benchmarks/2026-12-03_learner_round6_h200/) runs at most `_MAX_PARTIALS`
programs a member, each walking its row blocks in series: latency-bound, 204 us a call on average on the
H200, about a fifth of the bandwidth at the largest call. `v2` (`v2:TILE:WARPS:STEPS`; `v2` alone is
v2:4096:16:4) gives each program STEPS row blocks of TILE // BLOCK_N rows in a row (unrolled) and so many
more programs, writes each program's partial affine gradients to a [K, G, P, N] float32 buffer, and adds
them up in a second, column-parallel kernel over P in a fixed order (benchmarks/2026-12-03_lnsilu_v2_cpu/:
checked on the CPU, the H200 sweep pending).

Both are opaque `torch.library.custom_op`s with autograd and shape functions: torch.compile calls them
as they are (an opaque op also runs under Triton's interpreter, so the CPU tests trace the compiled
path too), and a whole-cycle CUDA graph captures their launches like any kernel. Statistics in float32 whatever x's dtype; dx and
y in x's dtype. Import this module only where Triton is installed (CUDA learners); the CPU path never
calls it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Optional

import torch
import triton
import triton.language as tl

# at most this many programs per member share one member's affine-gradient reduction (each loops over
# its share of the rows); their partial sums are added up by one small torch.sum. 512: the critic's two
# members make 1024 programs, several waves of the 2-3 backward programs an H200 SM holds
_MAX_PARTIALS = 512
MAX_FEATURES = 4096  # a row must fit one program's registers


def _blocks(n: int, tile: int) -> tuple[int, int, int]:
    """(BLOCK_M rows, BLOCK_N >= n features, num_warps) of a program whose tile holds about `tile`
    elements over 256 threads."""
    block_n = triton.next_power_of_2(n)
    return max(1, min(64, tile // block_n)), block_n, 8


# tiles of 2048 elements: ptxas for sm_90a gives the forward 48-64 registers a thread (four programs an
# SM), the backward 80-107 (two); tiles of 4096 took 80-146 and 155-200, one backward program an SM
# (benchmarks/2026-12-02_learner_round6_h200/fused_kernels_ptxas.txt)
_FORWARD_TILE, _BACKWARD_TILE = 2048, 2048


@dataclass(frozen=True)
class BackwardConfig:
    """Which backward runs, and v2's program shape: `tile` elements a row block (BLOCK_M = tile // BLOCK_N
    rows, BLOCK_N the features padded to a power of two), `warps` a program, `steps` row blocks a program
    (its partial affine sums cover steps * BLOCK_M rows: fewer partials to add up, fewer programs)."""

    version: str = "v1"
    tile: int = 4096
    warps: int = 16
    steps: int = 4

    def spec(self) -> str:
        """The `DUORL_LNSILU_BWD` string that parses back to this config."""
        return "v1" if self.version == "v1" else f"v2:{self.tile}:{self.warps}:{self.steps}"


def parse_backward(spec: str) -> BackwardConfig:
    """`v1`, `v2` (v2:4096:16:4) or `v2:TILE:WARPS[:STEPS]` (TILE and WARPS powers of two, WARPS <= 32,
    STEPS >= 1, 1 when left out)."""
    parts = spec.strip().split(":")
    if parts[0] == "v1" and len(parts) == 1:
        return BackwardConfig("v1")
    if parts[0] == "v2" and len(parts) in (1, 3, 4):
        try:
            numbers = [int(v) for v in parts[1:]]
        except ValueError:
            numbers = []
        if len(numbers) == len(parts) - 1:
            cfg = BackwardConfig("v2", *numbers) if len(numbers) != 2 else BackwardConfig("v2", *numbers, 1)
            pow2 = all(v > 0 and v & (v - 1) == 0 for v in (cfg.tile, cfg.warps))
            if pow2 and cfg.warps <= 32 and cfg.steps >= 1:
                return cfg
    raise ValueError(f"DUORL_LNSILU_BWD={spec!r}: expected v1, v2 or v2:TILE:WARPS[:STEPS] "
                     "(TILE, WARPS powers of two, WARPS <= 32, STEPS >= 1)")


BACKWARD = parse_backward(os.environ.get("DUORL_LNSILU_BWD", "v1"))
# the v2 shapes the GPU microbench sweeps (benchmarks/scripts/layer_norm_silu_bench_h200.py), the first
# one `v2` alone: 16 warps a program, 8 elements a thread of each [BLOCK_M, BLOCK_N] tensor, 1-4 row
# blocks a program (at N = 768, 4-16 rows a partial: the partial sums are 4/R of the bytes dx and its
# inputs move, with the bias folded, R rows a program); ptxas for sm_90a: 64-128 registers, no spills
# but 4 B at N = 128 (benchmarks/2026-12-03_lnsilu_v2_cpu/fused_kernels_ptxas.txt; 32 elements a thread
# took 212-255 registers and spilled). Two of 8 warps for the contrast
V2_SWEEP = ("v2:4096:16:4", "v2:4096:16:2", "v2:4096:16:1", "v2:2048:8:8", "v2:2048:8:4")
_V2_MAX_ROWS = 128  # rows a block at most (narrow layers: N = 128 with a tile of 16384)
# the partial-sum reduction's tile: BLOCK_P partials x BLOCK_C features, 4 warps (16 elements a thread)
_REDUCE_BLOCK_P, _REDUCE_BLOCK_C, _REDUCE_WARPS = 32, 64, 4
# tests set NaN: every output and partial buffer starts poisoned, so an element left unwritten shows
_POISON: Optional[float] = None


def _new(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """torch.empty, NaN-filled when the tests poison (_POISON)."""
    t = torch.empty(shape, dtype=dtype, device=device)
    return t.fill_(_POISON) if _POISON is not None else t


def v2_blocks(n: int, cfg: BackwardConfig) -> tuple[int, int]:
    """(BLOCK_M rows, BLOCK_N >= n features) of a v2 backward row block."""
    block_n = triton.next_power_of_2(n)
    return max(1, min(_V2_MAX_ROWS, cfg.tile // block_n)), block_n


@triton.jit
def layer_norm_silu_fwd_kernel(X, IN_BIAS, W, B, Y, MEAN, RSTD, M, N, eps,
                    HAS_IN_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    g = tl.program_id(0)
    rows = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    row_ok = rows < M
    col_ok = cols < N
    ok = row_ok[:, None] & col_ok[None, :]
    grow = g.to(tl.int64) * M + rows
    offs = grow[:, None] * N + cols[None, :]
    x = tl.load(X + offs, mask=ok, other=0.0).to(tl.float32)
    if HAS_IN_BIAS:
        x += tl.load(IN_BIAS + g * N + cols, mask=col_ok, other=0.0).to(tl.float32)[None, :]
    mean = tl.sum(x, axis=1) / N
    xc = tl.where(ok, x - mean[:, None], 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(xc * xc, axis=1) / N + eps)
    w = tl.load(W + g * N + cols, mask=col_ok, other=0.0).to(tl.float32)
    b = tl.load(B + g * N + cols, mask=col_ok, other=0.0).to(tl.float32)
    z = xc * rstd[:, None] * w[None, :] + b[None, :]
    y = z * tl.sigmoid(z)
    tl.store(Y + offs, y.to(Y.dtype.element_ty), mask=ok)
    tl.store(MEAN + grow, mean, mask=row_ok)
    tl.store(RSTD + grow, rstd, mask=row_ok)


@triton.jit
def _member_params(W, B, IN_BIAS, g, cols, col_ok, N, HAS_IN_BIAS: tl.constexpr):
    """Member g's weight, bias and in_bias (the weight again without one: read only with one), in fp32."""
    w = tl.load(W + g * N + cols, mask=col_ok, other=0.0).to(tl.float32)
    b = tl.load(B + g * N + cols, mask=col_ok, other=0.0).to(tl.float32)
    ib = w
    if HAS_IN_BIAS:
        ib = tl.load(IN_BIAS + g * N + cols, mask=col_ok, other=0.0).to(tl.float32)
    return w, b, ib


@triton.jit
def _bwd_row_block(DY, X, MEAN, RSTD, DX, g, rows, cols, col_ok, w, b, ib, M, N,
                   HAS_IN_BIAS: tl.constexpr, AFFINE_GRADS: tl.constexpr, BLOCK_N: tl.constexpr):
    """The backward of one row block of member g (both backwards' body): stores its dx and returns its
    sums over rows of dz * xhat and dz (d weight, d bias: zeros unless AFFINE_GRADS) and of dx (d in_bias:
    zeros unless HAS_IN_BIAS)."""
    row_ok = rows < M
    ok = row_ok[:, None] & col_ok[None, :]
    grow = g.to(tl.int64) * M + rows
    offs = grow[:, None] * N + cols[None, :]
    x = tl.load(X + offs, mask=ok, other=0.0).to(tl.float32)
    if HAS_IN_BIAS:
        x += ib[None, :]
    dy = tl.load(DY + offs, mask=ok, other=0.0).to(tl.float32)
    mean = tl.load(MEAN + grow, mask=row_ok, other=0.0)
    rstd = tl.load(RSTD + grow, mask=row_ok, other=0.0)
    xhat = tl.where(ok, (x - mean[:, None]) * rstd[:, None], 0.0)
    z = xhat * w[None, :] + b[None, :]
    s = tl.sigmoid(z)
    dz = tl.where(ok, dy * s * (1.0 + z * (1.0 - s)), 0.0)  # silu'(z) = s * (1 + z * (1 - s))
    dw = tl.zeros((BLOCK_N,), dtype=tl.float32)
    db = tl.zeros((BLOCK_N,), dtype=tl.float32)
    dib = tl.zeros((BLOCK_N,), dtype=tl.float32)
    if AFFINE_GRADS:
        dw = tl.sum(dz * xhat, axis=0)
        db = tl.sum(dz, axis=0)
    gx = dz * w[None, :]
    c1 = tl.sum(gx * xhat, axis=1) / N
    c2 = tl.sum(gx, axis=1) / N
    dx = tl.where(ok, (gx - xhat * c1[:, None] - c2[:, None]) * rstd[:, None], 0.0)
    tl.store(DX + offs, dx.to(DX.dtype.element_ty), mask=ok)
    if HAS_IN_BIAS:
        dib = tl.sum(dx, axis=0)
    return dw, db, dib


@triton.jit
def layer_norm_silu_bwd_kernel(DY, X, IN_BIAS, W, B, MEAN, RSTD, DX, DW_PART, DB_PART, DIB_PART, M, N, P,
                     STEPS: tl.constexpr, HAS_IN_BIAS: tl.constexpr, AFFINE_GRADS: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    g = tl.program_id(0)
    p = tl.program_id(1)
    cols = tl.arange(0, BLOCK_N)
    col_ok = cols < N
    w, b, ib = _member_params(W, B, IN_BIAS, g, cols, col_ok, N, HAS_IN_BIAS)
    dw = tl.zeros((BLOCK_N,), dtype=tl.float32)
    db = tl.zeros((BLOCK_N,), dtype=tl.float32)
    dib = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for step in range(0, STEPS):  # row blocks p, p + P, p + 2P, ...
        rows = (p + step * P) * BLOCK_M + tl.arange(0, BLOCK_M)
        bw, bb, bib = _bwd_row_block(DY, X, MEAN, RSTD, DX, g, rows, cols, col_ok, w, b, ib, M, N,
                                     HAS_IN_BIAS, AFFINE_GRADS, BLOCK_N)
        dw += bw
        db += bb
        dib += bib
    part = (g * P + p) * N + cols
    if AFFINE_GRADS:
        tl.store(DW_PART + part, dw, mask=col_ok)
        tl.store(DB_PART + part, db, mask=col_ok)
    if HAS_IN_BIAS:
        tl.store(DIB_PART + part, dib, mask=col_ok)


@triton.jit
def layer_norm_silu_bwd_dx_kernel(DY, X, IN_BIAS, W, B, MEAN, RSTD, DX, PART, M, N, P,
                                  STEPS: tl.constexpr, HAS_IN_BIAS: tl.constexpr, AFFINE_GRADS: tl.constexpr,
                                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """v2: dx of STEPS consecutive row blocks, and their partial affine sums into PART [K, G, P, N]
    (k: d weight, d bias when AFFINE_GRADS, then d in_bias when HAS_IN_BIAS)."""
    g = tl.program_id(0)
    p = tl.program_id(1)
    cols = tl.arange(0, BLOCK_N)
    col_ok = cols < N
    w, b, ib = _member_params(W, B, IN_BIAS, g, cols, col_ok, N, HAS_IN_BIAS)
    dw = tl.zeros((BLOCK_N,), dtype=tl.float32)
    db = tl.zeros((BLOCK_N,), dtype=tl.float32)
    dib = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for step in tl.static_range(STEPS):  # unrolled: the blocks' loads can be in flight together
        rows = (p * STEPS + step) * BLOCK_M + tl.arange(0, BLOCK_M)
        bw, bb, bib = _bwd_row_block(DY, X, MEAN, RSTD, DX, g, rows, cols, col_ok, w, b, ib, M, N,
                                     HAS_IN_BIAS, AFFINE_GRADS, BLOCK_N)
        dw += bw
        db += bb
        dib += bib
    part = (g.to(tl.int64) * P + p) * N + cols
    plane = tl.num_programs(0).to(tl.int64) * P * N  # one k's [G, P, N]
    if AFFINE_GRADS:
        tl.store(PART + part, dw, mask=col_ok)
        tl.store(PART + plane + part, db, mask=col_ok)
        if HAS_IN_BIAS:
            tl.store(PART + 2 * plane + part, dib, mask=col_ok)
    elif HAS_IN_BIAS:
        tl.store(PART + part, dib, mask=col_ok)


@triton.jit
def layer_norm_silu_bwd_reduce_kernel(PART, OUT0, OUT1, OUT2, G, P, N, TILES: tl.constexpr,
                                      BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr):
    """v2: OUTk[g, :] = sum over p of PART[k, g, p, :], one program a (k, g) and BLOCK_C features, the
    partials added in a fixed order (TILES = cdiv(P, BLOCK_P) tiles in sequence, then one tree over the
    tile; a constexpr count, as Triton's interpreter takes no runtime loop bound)."""
    kg = tl.program_id(0)
    k = kg // G
    g = kg % G
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    col_ok = cols < N
    base = kg.to(tl.int64) * P * N
    acc = tl.zeros((BLOCK_P, BLOCK_C), dtype=tl.float32)
    for t in range(0, TILES):
        prow = t * BLOCK_P + tl.arange(0, BLOCK_P)
        ok = (prow < P)[:, None] & col_ok[None, :]
        acc += tl.load(PART + base + prow[:, None].to(tl.int64) * N + cols[None, :], mask=ok, other=0.0)
    total = tl.sum(acc, axis=0)
    out = g * N + cols
    if k == 0:
        tl.store(OUT0 + out, total, mask=col_ok)
    elif k == 1:
        tl.store(OUT1 + out, total, mask=col_ok)
    else:
        tl.store(OUT2 + out, total, mask=col_ok)


def _backward_v2(dy: torch.Tensor, x: torch.Tensor, in_bias: Optional[torch.Tensor], weight: torch.Tensor,
                 bias: torch.Tensor, mean: torch.Tensor, rstd: torch.Tensor, affine_grads: bool,
                 cfg: BackwardConfig) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dx, d in_bias, d weight, d bias) by the v2 kernels; inputs contiguous."""
    g, m, n = x.shape
    block_m, block_n = v2_blocks(n, cfg)
    partials = triton.cdiv(triton.cdiv(m, block_m), cfg.steps)
    has_in_bias = in_bias is not None
    k = 2 * affine_grads + has_in_bias
    dx = _new(tuple(x.shape), x.dtype, x.device)
    part = _new((k, g, partials, n) if k else (1,), torch.float32, x.device)
    layer_norm_silu_bwd_dx_kernel[(g, partials)](
        dy, x, in_bias if has_in_bias else x, weight, bias, mean, rstd, dx, part, m, n, partials,
        STEPS=cfg.steps, HAS_IN_BIAS=has_in_bias, AFFINE_GRADS=affine_grads, BLOCK_M=block_m, BLOCK_N=block_n,
        num_warps=cfg.warps)

    def grads(asked: bool) -> torch.Tensor:  # a gradient not asked for is an empty tensor
        return _new((g, n) if asked else (0,), torch.float32, x.device)

    dw, db, dib = grads(affine_grads), grads(affine_grads), grads(has_in_bias)
    if k:
        outs = (dw, db, dib) if affine_grads else (dib, dib, dib)
        layer_norm_silu_bwd_reduce_kernel[(k * g, triton.cdiv(n, _REDUCE_BLOCK_C))](
            part, *outs, g, partials, n, TILES=triton.cdiv(partials, _REDUCE_BLOCK_P), BLOCK_P=_REDUCE_BLOCK_P, BLOCK_C=_REDUCE_BLOCK_C, num_warps=_REDUCE_WARPS)
    return dx, dib, dw, db


@torch.library.custom_op("duorl::layer_norm_silu", mutates_args=())
def _layer_norm_silu_op(x: torch.Tensor, in_bias: Optional[torch.Tensor], weight: torch.Tensor, bias: torch.Tensor,
                        eps: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(y, mean, rstd) for x [G, M, N] and parameters [G, N]."""
    # contiguous already when called through layer_norm_silu (no copy then); a compiler may pass others
    x, weight, bias = x.contiguous(), weight.contiguous(), bias.contiguous()
    in_bias = in_bias.contiguous() if in_bias is not None else None
    g, m, n = x.shape
    y = _new(tuple(x.shape), x.dtype, x.device)
    mean = _new((g, m), torch.float32, x.device)
    rstd = _new((g, m), torch.float32, x.device)
    block_m, block_n, warps = _blocks(n, _FORWARD_TILE)
    has_in_bias = in_bias is not None
    layer_norm_silu_fwd_kernel[(g, triton.cdiv(m, block_m))](
        x, in_bias if has_in_bias else x, weight, bias, y, mean, rstd, m, n, eps,
        HAS_IN_BIAS=has_in_bias, BLOCK_M=block_m, BLOCK_N=block_n, num_warps=warps)
    return y, mean, rstd


@torch.library.custom_op("duorl::layer_norm_silu_backward", mutates_args=())
def _layer_norm_silu_backward_op(dy: torch.Tensor, x: torch.Tensor, in_bias: Optional[torch.Tensor], weight: torch.Tensor,
                                 bias: torch.Tensor, mean: torch.Tensor, rstd: torch.Tensor,
                                 affine_grads: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dx, d in_bias, d weight, d bias); the last three are [G, N] float32, empty when not asked for."""
    dy, x, weight, bias, mean, rstd = (t.contiguous() for t in (dy, x, weight, bias, mean, rstd))
    in_bias = in_bias.contiguous() if in_bias is not None else None
    if BACKWARD.version == "v2":
        return _backward_v2(dy, x, in_bias, weight, bias, mean, rstd, affine_grads, BACKWARD)
    g, m, n = x.shape
    block_m, block_n, warps = _blocks(n, _BACKWARD_TILE)
    partials = min(triton.cdiv(m, block_m), _MAX_PARTIALS)
    dx = _new(tuple(x.shape), x.dtype, x.device)
    has_in_bias = in_bias is not None
    part_shape = (g, partials, n)
    dw_part = _new(part_shape if affine_grads else (0,), torch.float32, x.device)
    db_part = _new(part_shape if affine_grads else (0,), torch.float32, x.device)
    dib_part = _new(part_shape if has_in_bias else (0,), torch.float32, x.device)
    layer_norm_silu_bwd_kernel[(g, partials)](
        dy, x, in_bias if has_in_bias else x, weight, bias, mean, rstd, dx, dw_part, db_part, dib_part, m, n, partials,
        STEPS=triton.cdiv(triton.cdiv(m, block_m), partials), HAS_IN_BIAS=has_in_bias, AFFINE_GRADS=affine_grads, BLOCK_M=block_m, BLOCK_N=block_n, num_warps=warps)
    # a gradient not asked for is an empty tensor (an op's outputs may not alias each other)
    return (dx, dib_part.sum(1) if has_in_bias else dib_part, dw_part.sum(1) if affine_grads else dw_part,
            db_part.sum(1) if affine_grads else db_part)


@_layer_norm_silu_op.register_fake
def _(x: torch.Tensor, in_bias: Optional[torch.Tensor], weight: torch.Tensor, bias: torch.Tensor,
      eps: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g, m, _ = x.shape
    return torch.empty_like(x), x.new_empty((g, m), dtype=torch.float32), x.new_empty((g, m), dtype=torch.float32)


@_layer_norm_silu_backward_op.register_fake
def _(dy: torch.Tensor, x: torch.Tensor, in_bias: Optional[torch.Tensor], weight: torch.Tensor, bias: torch.Tensor,
      mean: torch.Tensor, rstd: torch.Tensor, affine_grads: bool) -> tuple[torch.Tensor, ...]:
    g, _, n = x.shape

    def grads(asked: bool) -> torch.Tensor:
        return x.new_empty((g, n) if asked else (0,), dtype=torch.float32)

    return torch.empty_like(x), grads(in_bias is not None), grads(affine_grads), grads(affine_grads)


def _setup_context(ctx: Any, inputs: tuple, output: tuple) -> None:
    x, in_bias, weight, bias, _ = inputs
    _, mean, rstd = output
    ctx.save_for_backward(x, in_bias, weight, bias, mean, rstd)
    ctx.mark_non_differentiable(mean, rstd)


def _backward(ctx: Any, dy: torch.Tensor, _dmean: Any, _drstd: Any) -> tuple:
    x, in_bias, weight, bias, mean, rstd = ctx.saved_tensors
    _, needs_in_bias, needs_weight, needs_bias, _ = ctx.needs_input_grad
    affine = bool(needs_weight or needs_bias)
    dx, dib, dw, db = _layer_norm_silu_backward_op(dy, x, in_bias, weight, bias, mean, rstd, affine)
    return (dx, dib.to(in_bias.dtype) if needs_in_bias else None, dw.to(weight.dtype) if needs_weight else None,
            db.to(bias.dtype) if needs_bias else None, None)


torch.library.register_autograd("duorl::layer_norm_silu", _backward, setup_context=_setup_context)


def layer_norm_silu(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float,
                    in_bias: torch.Tensor | None = None) -> torch.Tensor:
    """silu(layer_norm(x + in_bias) * weight + bias) over the last dim.

    x [M, N] with parameters [N] (one network), or x [G, M, N] with parameters [G, N] (G members);
    the result has x's shape and dtype."""
    n = x.shape[-1]
    if n > MAX_FEATURES:
        raise ValueError(f"layer_norm_silu: {n} features, at most {MAX_FEATURES} fit one program")
    members = weight.shape[0] if weight.dim() == 2 else 1
    x3 = x.reshape(members, -1, n).contiguous()

    def per_member(t: torch.Tensor) -> torch.Tensor:
        return t.reshape(members, n).contiguous()

    y, _, _ = _layer_norm_silu_op(x3, per_member(in_bias) if in_bias is not None else None, per_member(weight),
                                  per_member(bias), float(eps))
    return y.reshape(x.shape)


def reference_layer_norm_silu(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float,
                              in_bias: torch.Tensor | None = None) -> torch.Tensor:
    """The same function in plain torch ops (tests compare the kernels with it in float64)."""
    if in_bias is not None:
        x = x + (in_bias.unsqueeze(-2) if in_bias.dim() == 2 else in_bias)
    y = torch.nn.functional.layer_norm(x, (x.shape[-1],), None, None, eps)
    w = weight.unsqueeze(-2) if weight.dim() == 2 else weight
    b = bias.unsqueeze(-2) if bias.dim() == 2 else bias
    return torch.nn.functional.silu(y * w + b)
