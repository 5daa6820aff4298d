"""Issue #41 round 6: duorl's Triton kernels compiled for the H200 (sm_90a) without a GPU, and ptxas's
resource report for each: registers a thread, spill stores, shared memory (METHOD.md: read what costs
no device time). The tiles are those `gpu/fused_norm.py` picks for the sac widths (the v1 backward, and
the v2 backward at every config of `fused_norm.V2_SWEEP` with its partial-sum reduction), and those of
`gpu/column_stats.py`.

    PYTHONPATH=src:<triton 3.6.0> python benchmarks/scripts/fused_kernels_ptxas.py

A program of 8 warps (256 threads) fits twice on an SM at <= 128 registers a thread (65536 a SM).
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from duorl.gpu import column_stats, fused_norm

TARGET = GPUTarget("cuda", 90, 32)
PTXAS = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "ptxas")


def report(kernel: object, signature: dict[str, str], constexprs: dict[str, object], warps: int, label: str) -> None:
    compiled = triton.compile(ASTSource(kernel, signature, constexprs), target=TARGET, options={"num_warps": warps})
    with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
        f.write(compiled.asm["ptx"])
    out = subprocess.run([PTXAS, "-arch=sm_90a", "-v", f.name, "-o", os.devnull], capture_output=True, text=True).stderr
    os.unlink(f.name)
    regs = re.search(r"Used (\d+) registers", out)
    spills = re.search(r"(\d+) bytes spill stores", out)
    print(f"{label:40} warps {warps}  registers {regs.group(1) if regs else '?':>4}  "
          f"spill stores {spills.group(1) if spills else '?':>3} B  shared {compiled.metadata.shared} B")


def main() -> None:
    print(f"triton {triton.__version__}, target sm_90a")
    for n, dtype in ((768, "bf16"), (384, "bf16"), (192, "bf16"), (512, "bf16"), (256, "bf16"), (128, "bf16"), (768, "fp32")):
        act = f"*{dtype}"
        bm, bn, warps = fused_norm._blocks(n, fused_norm._FORWARD_TILE)
        report(fused_norm.layer_norm_silu_fwd_kernel,
               {"X": act, "IN_BIAS": "*fp32", "W": "*fp32", "B": "*fp32", "Y": act, "MEAN": "*fp32", "RSTD": "*fp32",
                "M": "i32", "N": "i32", "eps": "fp32", "HAS_IN_BIAS": "constexpr", "BLOCK_M": "constexpr",
                "BLOCK_N": "constexpr"},
               {"HAS_IN_BIAS": True, "BLOCK_M": bm, "BLOCK_N": bn}, warps, f"forward  N={n} {dtype} [{bm} x {bn}]")
        bm, bn, warps = fused_norm._blocks(n, fused_norm._BACKWARD_TILE)
        report(fused_norm.layer_norm_silu_bwd_kernel,
               {"DY": act, "X": act, "IN_BIAS": "*fp32", "W": "*fp32", "B": "*fp32", "MEAN": "*fp32", "RSTD": "*fp32",
                "DX": act, "DW_PART": "*fp32", "DB_PART": "*fp32", "DIB_PART": "*fp32", "M": "i32", "N": "i32", "P": "i32",
                "STEPS": "constexpr", "HAS_IN_BIAS": "constexpr", "AFFINE_GRADS": "constexpr", "BLOCK_M": "constexpr",
                "BLOCK_N": "constexpr"},
               {"STEPS": 16, "HAS_IN_BIAS": True, "AFFINE_GRADS": True, "BLOCK_M": bm, "BLOCK_N": bn}, warps,
               f"backward N={n} {dtype} [{bm} x {bn}]")
    for spec in fused_norm.V2_SWEEP:
        cfg = fused_norm.parse_backward(spec)
        for n in (768, 384, 192, 512, 256, 128):
            bm, bn = fused_norm.v2_blocks(n, cfg)
            report(fused_norm.layer_norm_silu_bwd_dx_kernel,
                   {"DY": "*bf16", "X": "*bf16", "IN_BIAS": "*fp32", "W": "*fp32", "B": "*fp32", "MEAN": "*fp32",
                    "RSTD": "*fp32", "DX": "*bf16", "PART": "*fp32", "M": "i32", "N": "i32", "P": "i32",
                    "STEPS": "constexpr", "HAS_IN_BIAS": "constexpr", "AFFINE_GRADS": "constexpr",
                    "BLOCK_M": "constexpr", "BLOCK_N": "constexpr"},
                   {"STEPS": cfg.steps, "HAS_IN_BIAS": True, "AFFINE_GRADS": True, "BLOCK_M": bm, "BLOCK_N": bn},
                   cfg.warps, f"v2 {spec:14} N={n} [{bm} x {bn}]")
    report(fused_norm.layer_norm_silu_bwd_reduce_kernel,
           {"PART": "*fp32", "OUT0": "*fp32", "OUT1": "*fp32", "OUT2": "*fp32", "G": "i32", "P": "i32", "N": "i32",
            "TILES": "constexpr", "BLOCK_P": "constexpr", "BLOCK_C": "constexpr"},
           {"TILES": 64, "BLOCK_P": fused_norm._REDUCE_BLOCK_P, "BLOCK_C": fused_norm._REDUCE_BLOCK_C},
           fused_norm._REDUCE_WARPS, f"v2 reduce [{fused_norm._REDUCE_BLOCK_P} x {fused_norm._REDUCE_BLOCK_C}]")
    report(column_stats.batch_norm_stats_partial_kernel,
           {"X": "*fp32", "MEAN_PART": "*fp32", "M2_PART": "*fp32", "R": "i32", "D": "i32", "P": "i32", "stride_g": "i32",
            "stride_r": "i32", "stride_d": "i32", "BLOCK_R": "constexpr", "BLOCK_D": "constexpr"},
           {"BLOCK_R": column_stats._BLOCK_R, "BLOCK_D": column_stats._BLOCK_D}, 4, "column stats, blocks [64 x 32]")
    report(column_stats.batch_norm_stats_merge_kernel,
           {"MEAN_PART": "*fp32", "M2_PART": "*fp32", "MEAN": "*fp32", "VAR": "*fp32", "R": "i32", "D": "i32",
            "P": "constexpr", "BLOCK_P": "constexpr", "BLOCK_R": "constexpr", "BLOCK_D": "constexpr"},
           {"P": 64, "BLOCK_P": 64, "BLOCK_R": column_stats._BLOCK_R, "BLOCK_D": column_stats._BLOCK_D}, 4,
           "column stats merge, 64 blocks")


if __name__ == "__main__":
    main()
