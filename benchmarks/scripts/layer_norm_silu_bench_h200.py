"""Issue #41: LayerNorm+SiLU forward and backward per call on one GPU: torch.compile's plain blocks (the
learner's default, `layer_norm_silu=compile`), the fused Triton kernels with the v1 backward, and with
the v2 backward at each config of `fused_norm.V2_SWEEP` (benchmarks/2026-12-03_lnsilu_v2_cpu/README.md).

    PYTHONPATH=src python benchmarks/scripts/layer_norm_silu_bench_h200.py --out $OUT/lnsilu.json
    TRITON_INTERPRET=1 PYTHONPATH=src:<triton> python benchmarks/scripts/layer_norm_silu_bench_h200.py --small

The shapes are sac's at algo.batch_size 8192 with symmetry (16384 rows): the critic's [2, 16384, N] for
its two members (N = 768, 384, 192), the actor's plain [16384, N] layers (512, 256, 128). Each variant is
first checked against float32 torch on the same (bf16) inputs, then timed: one call of `fn` runs the
variant on every one of `sets` input sets (together more than twice the L2 cache), `fn` is captured in a
CUDA graph (the learner replays graphs: no host overhead), and triton.testing.do_bench takes the median
of its replays; a call's time is that over `sets`. Forward alone, then forward + backward; backward =
their difference. GB/s counts the bytes a call must move (forward: x read, y written, the row statistics;
backward: x and dy read, dx written, the statistics read), not the partial sums or Inductor's re-reads.
The compiled path runs under bf16 autocast as in the learner and ends in the bf16 cast its next linear
makes. Bounded: a variant that would start after --budget-s is skipped and listed (the compile variant,
v1 and `v2` come first for every shape, then the other v2 configs). With --small (tiny shapes, also on
the CPU under Triton's interpreter, where nothing is timed) it checks correctness only.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

import torch
import torch.nn.functional as F

import triton
import triton.testing

from duorl.gpu import fused_norm

SHAPES = [(2, 16384, 768), (2, 16384, 384), (2, 16384, 192), (0, 16384, 512), (0, 16384, 256), (0, 16384, 128)]
SMALL_SHAPES = [(2, 64, 768), (2, 48, 192), (0, 64, 512), (0, 80, 128)]  # G 0: a plain [M, N] layer (the actor)
EPS = 1e-5
# bf16 y and dx (tests/gpu/test_fused_norm.py); the fused kernels' fp32 affine sums. The compiled path is
# the baseline, not under test: its affine gradients are held to the bf16 bound (without autocast, on the
# CPU, its LayerNorm runs in bf16: 8e-3 there)
BOUND_ACT, BOUND_AFFINE = 1e-2, 1e-3


@dataclass
class Inputs:
    """One input set: x, dy in bf16, fp32 parameters (leaves that want gradients)."""

    x: torch.Tensor
    w: torch.Tensor
    b: torch.Tensor
    ib: Optional[torch.Tensor]
    dy: torch.Tensor

    def leaves(self) -> list[torch.Tensor]:
        return [t for t in (self.x, self.w, self.b, self.ib) if t is not None]


@dataclass
class Row:
    shape: str
    variant: str
    fold: bool
    errors: dict[str, float] = field(default_factory=dict)
    ok: bool = False
    sets: int = 0
    us_fwd: Optional[float] = None
    us_total: Optional[float] = None
    us_bwd: Optional[float] = None
    gbs_fwd: Optional[float] = None
    gbs_bwd: Optional[float] = None


def make_inputs(g: int, m: int, n: int, fold: bool, device: torch.device, seed: int) -> Inputs:
    gen = torch.Generator(device="cpu").manual_seed(seed)
    lead = (g,) if g else ()

    def rnd(*shape: int, scale: float = 1.0, shift: float = 0.0, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return (torch.randn(*shape, generator=gen) * scale + shift).to(device, dtype)

    return Inputs(rnd(*lead, m, n, scale=3.0, shift=1.0, dtype=torch.bfloat16).requires_grad_(),
                  rnd(*lead, n, scale=0.3, shift=1.0).requires_grad_(), rnd(*lead, n, scale=0.2).requires_grad_(),
                  rnd(*lead, n, scale=0.5).requires_grad_() if fold else None,
                  rnd(*lead, m, n, dtype=torch.bfloat16))


def plain(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The learner's unfused block after its linear map: EnsembleLayerNorm (members) or nn.LayerNorm
    (the actor), SiLU, then the bf16 cast of the next linear map."""
    if w.dim() == 2:
        y = torch.addcmul(b.unsqueeze(1), F.layer_norm(x, (x.shape[-1],), None, None, EPS), w.unsqueeze(1))
    else:
        y = F.layer_norm(x, (x.shape[-1],), w, b, EPS)
    return F.silu(y).to(x.dtype)


def variant_fn(name: str, compiled: Callable) -> Callable[[Inputs], torch.Tensor]:
    """inputs -> y for the variant `name` (compile, v1, or a v2 spec); sets fused_norm.BACKWARD, read at
    each backward call (and so at graph capture)."""
    if name == "compile":
        return lambda i: compiled(i.x, i.w, i.b)

    def fused(i: Inputs) -> torch.Tensor:
        fused_norm.BACKWARD = fused_norm.parse_backward(name)
        return fused_norm.layer_norm_silu(i.x, i.w, i.b, EPS, in_bias=i.ib)

    return fused


def check(fn: Callable[[Inputs], torch.Tensor], i: Inputs, autocast: Callable) -> dict[str, float]:
    """Relative errors of y and every gradient against float32 torch on the same inputs."""
    with autocast():
        y = fn(i)
    grads = torch.autograd.grad(y, i.leaves(), i.dy)
    ref_in = [t.detach().float().requires_grad_() for t in i.leaves()]
    ref = fused_norm.reference_layer_norm_silu(ref_in[0], ref_in[1], ref_in[2], EPS, ref_in[3] if i.ib is not None else None)
    ref_grads = torch.autograd.grad(ref, ref_in, i.dy.float())

    def rel(a: torch.Tensor, r: torch.Tensor) -> float:
        a, r = a.detach().double(), r.detach().double()
        return float((a - r).norm() / r.norm()) if bool(torch.isfinite(a).all()) else math.inf

    names = ["y", "dx", "dweight", "dbias", "d_in_bias"]
    return {k: rel(a, r) for k, a, r in zip(names, [y, *grads], [ref, *ref_grads])}


def graph_ms(fn: Callable[[], None], warmup_ms: int, rep_ms: int) -> float:
    """Median ms of a CUDA graph replay of fn (warmed on a side stream, as torch's docs capture)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    ms = triton.testing.do_bench(graph.replay, warmup=warmup_ms, rep=rep_ms, return_mode="median")
    del graph
    return float(ms)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="", help="write the rows as JSON here")
    ap.add_argument("--budget-s", type=float, default=100.0, help="start no variant after this many seconds")
    ap.add_argument("--warmup-ms", type=int, default=10)
    ap.add_argument("--rep-ms", type=int, default=40)
    ap.add_argument("--configs", default=",".join(fused_norm.V2_SWEEP), help="v2 specs, comma-separated")
    ap.add_argument("--fold", action="store_true", help="also the fused variants with the linear bias folded in")
    ap.add_argument("--small", action="store_true", help="tiny shapes, correctness only (runs on the CPU too)")
    args = ap.parse_args()
    start = time.monotonic()
    cuda = torch.cuda.is_available()
    if not cuda and os.environ.get("TRITON_INTERPRET") != "1":
        print("no GPU: run with TRITON_INTERPRET=1 and --small (correctness only)", file=sys.stderr)
        return 2
    device = torch.device("cuda" if cuda else "cpu")
    timing = cuda and not args.small
    shapes = SMALL_SHAPES if args.small else SHAPES
    configs = [c for c in args.configs.split(",") if c]
    for c in configs:
        fused_norm.parse_backward(c)  # a bad spec fails before anything runs
    torch._dynamo.config.cache_size_limit = 64
    compiled = torch.compile(plain, dynamic=False) if cuda else torch.compile(plain, backend="aot_eager", dynamic=False)

    def autocast() -> torch.autocast:
        return torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False, enabled=cuda)

    l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 50 << 20) if cuda else 0
    first = ["compile", "v1", configs[0]] if configs else ["compile", "v1"]
    # (shape index, variant, fold) in the order they run: the decisive ones for every shape first
    plan = [(s, v, False) for s in range(len(shapes)) for v in first]
    plan += [(s, v, False) for s in range(len(shapes)) for v in configs[1:]]
    if args.fold:
        plan += [(s, v, True) for s in range(len(shapes)) for v in ["v1", *configs]]
    rows: list[Row] = []
    skipped: list[str] = []
    print(f"device {torch.cuda.get_device_name() if cuda else 'cpu (Triton interpreter)'}, torch {torch.__version__}, "
          f"triton {triton.__version__}, L2 {l2 >> 20} MiB, budget {args.budget_s:.0f} s")
    for s, name, fold in plan:
        g, m, n = shapes[s]
        label = f"[{g}, {m}, {n}]" if g else f"[{m}, {n}]"
        if time.monotonic() - start > args.budget_s:
            skipped.append(f"{label} {name}{' fold' if fold else ''}")
            continue
        fn = variant_fn(name, compiled)
        per_set = 6 * (g or 1) * m * n  # bytes of x, dy, dx (bf16); x and y for the forward: 4
        sets = max(2, min(16, math.ceil(2 * l2 / per_set))) if timing else 1
        inputs = [make_inputs(g, m, n, fold, device, seed=1000 * s + k) for k in range(sets)]
        row = Row(label, name, fold, sets=sets)
        row.errors = check(fn, inputs[0], autocast)
        affine = BOUND_ACT if name == "compile" else BOUND_AFFINE
        row.ok = all(err < (BOUND_ACT if k in ("y", "dx") else affine) for k, err in row.errors.items())
        if timing and row.ok:
            def forward() -> None:
                with autocast():
                    for i in inputs:
                        fn(i)

            def forward_backward() -> None:
                for i in inputs:
                    with autocast():
                        y = fn(i)
                    torch.autograd.grad(y, i.leaves(), i.dy)

            rows_stats = 8 * (g or 1) * m  # mean and rstd, fp32
            elems = (g or 1) * m * n
            row.us_fwd = 1e3 * graph_ms(forward, args.warmup_ms, args.rep_ms) / sets
            row.us_total = 1e3 * graph_ms(forward_backward, args.warmup_ms, args.rep_ms) / sets
            row.us_bwd = row.us_total - row.us_fwd
            row.gbs_fwd = (4 * elems + rows_stats) / row.us_fwd / 1e3
            row.gbs_bwd = (6 * elems + rows_stats) / max(row.us_bwd, 1e-3) / 1e3
        rows.append(row)
        del inputs
        if cuda:
            torch.cuda.empty_cache()
        errs = " ".join(f"{k} {v:.1e}" for k, v in row.errors.items())
        times = (f"fwd {row.us_fwd:8.1f} us  bwd {row.us_bwd:8.1f} us  ({row.gbs_fwd:6.0f} / {row.gbs_bwd:6.0f} GB/s)"
                 if row.us_fwd is not None else "(not timed)")
        print(f"{label:18} {name:14} {'fold' if fold else '    '} {'ok  ' if row.ok else 'FAIL'} {times}  {errs}",
              flush=True)
    if timing:
        print("\nper shape, forward + backward us: compile / v1 / best v2 (config); ratio best v2 / compile")
        for label in dict.fromkeys(r.shape for r in rows):
            mine = {r.variant: r.us_total for r in rows if r.shape == label and not r.fold and r.us_total is not None}
            v2 = {k: v for k, v in mine.items() if k.startswith("v2")}
            if "compile" in mine and v2:
                best = min(v2, key=v2.get)
                print(f"{label:18} {mine['compile']:8.1f} / {mine.get('v1', float('nan')):8.1f} / {v2[best]:8.1f} "
                      f"({best}); {v2[best] / mine['compile']:.3f}")
    if skipped:
        print(f"skipped past the budget: {', '.join(skipped)}")
    elapsed = time.monotonic() - start
    print(f"elapsed {elapsed:.1f} s")
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump({"device": torch.cuda.get_device_name() if cuda else "cpu-interpreter", "torch": torch.__version__,
                       "triton": triton.__version__, "timed": timing, "budget_s": args.budget_s, "elapsed_s": elapsed,
                       "warmup_ms": args.warmup_ms, "rep_ms": args.rep_ms, "rows": [r.__dict__ for r in rows],
                       "skipped": skipped}, f, indent=1)
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
