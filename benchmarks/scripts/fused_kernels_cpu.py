"""Issue #41 round 6: the relative error of duorl's Triton kernels against float64 torch, on the CPU
through Triton's interpreter (benchmarks/2026-12-02_learner_round6_h200/NOTES.md).

    TRITON_INTERPRET=1 PYTHONPATH=src:<triton> python benchmarks/scripts/fused_kernels_cpu.py

The widths are the learners' own (sac: critic 768/384/192 for 2 members, actor 512/256/128; flashsac's
input BatchNorm: 130 and 98 features over 4096 rows); the rows are fewer than on the GPU (the interpreter
runs each program in numpy). Fresh random inputs per case; ||out - ref|| / ||ref||. The LayerNorm+SiLU
cases run once per backward (`fused_norm.BACKWARD`: v1, then v2 at its default config and at one of 2 row
blocks a program, benchmarks/2026-12-03_lnsilu_v2_cpu/), the outputs NaN-poisoned first.
"""

from __future__ import annotations

import os

import torch

assert os.environ.get("TRITON_INTERPRET") == "1", "run with TRITON_INTERPRET=1 (the kernels run on the CPU)"
from duorl.gpu import fused_norm  # noqa: E402
from duorl.gpu.column_stats import column_mean_var  # noqa: E402


def rel(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out.detach().double() - ref.detach().double()).norm() / ref.detach().double().norm())


def layer_norm_silu_case(g: int, m: int, n: int, fold: bool, dtype: torch.dtype, seed: int) -> list[str]:
    gen = torch.Generator().manual_seed(seed)
    lead = (g,) if g else ()
    x = (torch.randn(*lead, m, n, generator=gen) * 3 + 1).to(dtype).requires_grad_()
    w = (torch.randn(*lead, n, generator=gen) * 0.3 + 1).requires_grad_()
    b = (torch.randn(*lead, n, generator=gen) * 0.2).requires_grad_()
    ib = (torch.randn(*lead, n, generator=gen) * 0.5).requires_grad_() if fold else None
    dy = torch.randn(*lead, m, n, generator=gen).to(dtype)
    leaves = [t for t in (x, w, b, ib) if t is not None]
    y = fused_norm.layer_norm_silu(x, w, b, 1e-5, in_bias=ib)
    grads = torch.autograd.grad(y, leaves, dy)
    ref_in = [t.detach().double().requires_grad_() for t in leaves]
    ref = fused_norm.reference_layer_norm_silu(ref_in[0], ref_in[1], ref_in[2], 1e-5, ref_in[3] if fold else None)
    ref_grads = torch.autograd.grad(ref, ref_in, dy.double())
    names = ["dx", "dweight", "dbias", "d_in_bias"][:len(leaves)]
    shape = f"[{g}, {m}, {n}]" if g else f"[{m}, {n}]"
    assert all(bool(torch.isfinite(t).all()) for t in (y, *grads)), "an output element left unwritten (NaN)"
    return [f"layer_norm_silu {fused_norm.BACKWARD.spec():12} {shape:16} {str(dtype).removeprefix('torch.'):8} fold={str(fold):5} y {rel(y, ref):.2e}  "
            + "  ".join(f"{k} {rel(a, r):.2e}" for k, a, r in zip(names, grads, ref_grads))]


def stats_case(shape: tuple[int, ...], expanded: bool, seed: int) -> str:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=gen) * 3 + 10
    if expanded:
        x = x.unsqueeze(0).expand(2, *shape)
    mean, var = column_mean_var(x)
    ref_var, ref_mean = torch.var_mean(x.double(), dim=-2, unbiased=False, keepdim=True)
    label = f"{list(x.shape)}{' (expanded)' if expanded else ''}"
    return f"column_mean_var {label:26} mean {rel(mean, ref_mean):.2e}  var {rel(var, ref_var):.2e}"


def main() -> None:
    print(f"torch {torch.__version__}, Triton interpreter")
    fused_norm._POISON = float("nan")
    seed = 0
    for spec in ("v1", "v2", "v2:2048:8:2"):
        fused_norm.BACKWARD = fused_norm.parse_backward(spec)
        for g, n in ((2, 768), (2, 384), (2, 192), (0, 512), (0, 256), (0, 128)):
            for dtype in (torch.float32, torch.bfloat16):
                seed += 1
                for line in layer_norm_silu_case(g, 512, n, True, dtype, seed):
                    print(line)
        print(layer_norm_silu_case(2, 512, 768, False, torch.bfloat16, 99)[0])
    for shape, expanded in (((4096, 130), True), ((4096, 98), False), ((2, 4096, 256), False)):
        seed += 1
        print(stats_case(shape, expanded, seed))


if __name__ == "__main__":
    main()
