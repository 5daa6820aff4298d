"""Kernel-level profile of learner iterations: what one iteration launches on the GPU and where its time goes.

`profile_kernels(step, n, sync)` runs `step` n times under torch.profiler (each iteration a named range,
bracketed by device synchronisations) and returns the GPU kernels (and memcpy/memset) of each iteration
from the profiler's trace. `summarize` turns them into what the learner-speed work needs:

- kernels per iteration and GPU time by kind (`KINDS`: GEMM, normalisation, elementwise, reduction,
  optimizer, sampling, indexing, copy, other), classified from the kernel names of cuBLAS/CUTLASS and of
  the kernels torch.compile generates (Triton names carry the fused ops: `triton_per_fused_native_layer_norm_...`);
- the achieved TFLOP/s of the GEMMs: the iteration's matrix-multiply FLOPs, counted by
  `torch.utils.flop_counter` on an eager twin of the learner, over the GEMM kernels' time;
- idle gaps: the iteration's span on the GPU (first kernel start to last kernel end) less the union of
  its kernels' intervals, and the gaps between consecutive kernels.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from typing import Any, Callable, Iterable

KINDS = ("gemm", "normalisation", "elementwise", "reduction", "optimizer", "sampling", "indexing", "copy", "other")

# first match wins, in this order (a fused Triton kernel is named by its ops: normalisation before the
# generic reduction it also is; "mm" templates of the compiler are GEMMs)
_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("gemm", ("gemm", "cutlass", "xmma", "nvjet", "wgmma", "cublas", "splitk", "triton_tem_fused_mm",
              "triton_tem_fused_bmm", "triton_tem_fused_addmm", "triton_tem_fused_baddbmm", "_mm_", "bmm_")),
    ("optimizer", ("adam", "multi_tensor_apply", "lerp", "foreach")),
    ("normalisation", ("layer_norm", "layernorm", "batch_norm", "batchnorm", "rms_norm", "welford")),
    ("sampling", ("philox", "random", "distribution", "normal_kernel", "uniform", "randint", "randn", "rand_")),
    ("indexing", ("index", "gather", "scatter", "searchsorted", "take")),
    ("copy", ("memcpy", "memset", "copy", "fill", "catarray", "cat_", "_to_copy")),
    ("reduction", ("triton_per_", "triton_red_", "reduce", "softmax", "cumsum", "scan", "norm_kernel", "sum_",
                   "mean_", "max_", "min_", "_norm")),
    ("elementwise", ("triton_poi_", "elementwise", "vectorized", "unrolled", "pointwise")),
)
_NEEDLES = dict(_RULES)
_KERNEL_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
_RANGE_PREFIX = "duorl_profiled_iteration_"
# host ranges torch.compile opens around a compiled region's forward and backward
_REGION_PREFIXES = ("Torch-Compiled Region", "CompiledFunction")


def classify(name: str) -> str:
    """The kind (one of KINDS) of a GPU kernel, from its name. A kernel torch.compile generated is named
    by its Triton template (`triton_poi`: pointwise, `triton_red`/`triton_per`: reductions, `triton_tem`:
    a GEMM template) and the ops fused into it: a fused kernel that also casts (`_to_copy`) is still
    elementwise work."""
    low = name.lower()
    if low.startswith("memcpy") or low.startswith("memset"):
        return "copy"
    if low.startswith("triton_"):
        if low.startswith("triton_tem"):
            return "gemm"
        for kind in ("normalisation", "optimizer", "sampling"):
            if any(n in low for n in _NEEDLES[kind]):
                return kind
        return "reduction" if low.startswith(("triton_red", "triton_per")) else "elementwise"
    for kind, needles in _RULES:
        if any(n in low for n in needles):
            return kind
    return "other"


@dataclasses.dataclass(frozen=True)
class Kernel:
    name: str
    start_us: float
    dur_us: float
    # what launched it, where the trace says (eager launches; a graph replay launches them all at once):
    # the innermost host op, and the torch.compile region around it ("eager" outside any)
    op: str | None = None
    region: str | None = None

    @property
    def end_us(self) -> float:
        return self.start_us + self.dur_us

    @property
    def kind(self) -> str:
        return classify(self.name)


def check_profile_device(device: str | None) -> None:
    """`--profile` times GPU kernels: refuse a CPU-only setting before anything is built."""
    import torch

    from duorl.config.errors import ConfigError

    if device == "cpu" or not torch.cuda.is_available():
        raise ConfigError("--profile", "given", f"profiles GPU kernels and this learner runs on the CPU "
                          f"(torch {torch.__version__}, CUDA available: {torch.cuda.is_available()})",
                          "a CUDA device", "run it on a GPU machine, or leave --profile out")


def kernels_by_iteration(events: Iterable[dict[str, Any]], iterations: int) -> list[list[Kernel]]:
    """The GPU kernels of each profiled iteration, from a chrome trace's events: a kernel belongs to the
    iteration whose host range (which ends with a device synchronisation) holds its start."""
    events = list(events)
    ranges = sorted((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0.0)), int(e["name"][len(_RANGE_PREFIX):]))
                    for e in events if str(e.get("name", "")).startswith(_RANGE_PREFIX) and e.get("ph") == "X"
                    and str(e.get("cat", "")).lower() == "user_annotation")
    if len(ranges) != iterations:
        raise RuntimeError(f"the profile holds {len(ranges)} iteration ranges, expected {iterations}")
    ops = {(e.get("args") or {}).get("External id"): e for e in events
           if str(e.get("cat", "")).lower() == "cpu_op" and e.get("ph") == "X"}
    regions = sorted((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0.0)), e.get("tid"), str(e["name"]))
                     for e in events if e.get("ph") == "X" and str(e.get("name", "")).startswith(_REGION_PREFIXES))
    out: list[list[Kernel]] = [[] for _ in range(iterations)]
    for e in events:
        if str(e.get("cat", "")).lower() not in _KERNEL_CATS or e.get("ph") != "X":
            continue
        op = ops.get((e.get("args") or {}).get("External id"))
        region = None
        if op is not None:
            t, tid = float(op["ts"]), op.get("tid")
            # the outermost compiled region holding the launching op (a compiled forward's backward is
            # its own CompiledFunctionBackward)
            region = next((name for start, end, rtid, name in regions if rtid == tid and start <= t <= end), "eager")
        k = Kernel(str(e["name"]), float(e["ts"]), float(e.get("dur", 0.0)), str(op["name"]) if op else None, region)
        for start, end, i in ranges:
            if start <= k.start_us <= end:
                out[i].append(k)
                break
    for ks in out:
        ks.sort(key=lambda k: k.start_us)
    return out


def profile_kernels(step: Callable[[], Any], iterations: int, sync: Callable[[], None]) -> list[list[Kernel]]:
    """Run `step` `iterations` times under torch.profiler; the GPU kernels of each run."""
    from torch.profiler import ProfilerActivity, profile, record_function

    sync()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for i in range(iterations):
            with record_function(f"{_RANGE_PREFIX}{i}"):
                step()
                sync()
    with tempfile.TemporaryDirectory(prefix="duorl-profile-") as d:
        path = os.path.join(d, "trace.json")
        prof.export_chrome_trace(path)
        with open(path, encoding="utf-8") as f:
            events = json.load(f)["traceEvents"]
    return kernels_by_iteration(events, iterations)


def _busy_us(kernels: list[Kernel]) -> float:
    """The union of the kernels' intervals (kernels on several streams overlap)."""
    busy, end = 0.0, float("-inf")
    for k in sorted(kernels, key=lambda k: k.start_us):
        if k.start_us >= end:
            busy += k.dur_us
            end = k.end_us
        elif k.end_us > end:
            busy += k.end_us - end
            end = k.end_us
    return busy


def _gaps_us(kernels: list[Kernel]) -> list[float]:
    """Idle time between each kernel's start and the latest end before it (0 where they overlap)."""
    gaps, end = [], None
    for k in sorted(kernels, key=lambda k: k.start_us):
        if end is not None:
            gaps.append(max(0.0, k.start_us - end))
        end = k.end_us if end is None else max(end, k.end_us)
    return gaps


def summarize(per_iteration: list[list[Kernel]], gemm_flop: float | None = None, top: int = 25) -> dict[str, Any]:
    """Per-iteration means over the profiled iterations (times in ms, gaps in microseconds)."""
    n = len(per_iteration)
    if n == 0 or not any(per_iteration):
        raise RuntimeError("the profile holds no GPU kernels (is the learner on a CUDA device?)")
    spans = [(ks[-1].end_us - ks[0].start_us) if ks else 0.0 for ks in per_iteration]
    busy = [_busy_us(ks) for ks in per_iteration]
    gaps = [g for ks in per_iteration for g in _gaps_us(ks)]
    by_kind: dict[str, dict[str, float]] = {}
    by_name: dict[str, list[float]] = {}
    by_source: dict[tuple[str, str, str], list[float]] = {}
    for ks in per_iteration:
        for k in ks:
            entry = by_kind.setdefault(k.kind, {"us": 0.0, "kernels": 0})
            entry["us"] += k.dur_us
            entry["kernels"] += 1
            by_name.setdefault(k.name, []).append(k.dur_us)
            if k.op is not None:
                by_source.setdefault((k.kind, k.op, k.region or "eager"), []).append(k.dur_us)
    kernel_us = sum(e["us"] for e in by_kind.values())
    kinds = {kind: {"ms_per_iteration": round(e["us"] / n / 1e3, 4), "kernels_per_iteration": round(e["kernels"] / n, 1),
                    "share_of_kernel_time": round(e["us"] / kernel_us, 4)}
             for kind in KINDS if (e := by_kind.get(kind))}
    names = sorted(by_name.items(), key=lambda kv: -sum(kv[1]))
    sources = sorted(by_source.items(), key=lambda kv: -sum(kv[1]))[:top]
    gemm_ms = by_kind.get("gemm", {"us": 0.0})["us"] / n / 1e3
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    out: dict[str, Any] = {
        "iterations_profiled": n,
        "kernels_per_iteration": round(sum(len(ks) for ks in per_iteration) / n, 1),
        "span_ms_per_iteration": round(mean(spans) / 1e3, 4),
        "busy_ms_per_iteration": round(mean(busy) / 1e3, 4),
        "idle_ms_per_iteration": round((mean(spans) - mean(busy)) / 1e3, 4),
        "idle_fraction_of_span": round(1.0 - mean(busy) / mean(spans), 4) if mean(spans) > 0 else None,
        "gaps_us": {"mean": round(mean(gaps), 3) if gaps else None,
                    "over_2us_per_iteration": round(sum(g > 2.0 for g in gaps) / n, 1),
                    "over_10us_per_iteration": round(sum(g > 10.0 for g in gaps) / n, 1),
                    "largest": round(max(gaps), 2) if gaps else None},
        "by_kind": kinds,
        # every distinct kernel, the costliest first (what `by_kind` was summed from)
        "kernels": [{"name": name[:200], "kind": classify(name), "ms_per_iteration": round(sum(d) / n / 1e3, 4),
                     "calls_per_iteration": round(len(d) / n, 1)} for name, d in names],
    }
    if sources:  # eager launches only: which host op (inside which compiled region) spent the time
        out["top_sources"] = [{"kind": kind, "op": op, "region": region[:80], "ms_per_iteration": round(sum(d) / n / 1e3, 4),
                               "calls_per_iteration": round(len(d) / n, 1)} for (kind, op, region), d in sources]
    if gemm_flop:
        out["gemm"] = {"tflop_per_iteration": round(gemm_flop / 1e12, 4), "ms_per_iteration": round(gemm_ms, 4),
                       "achieved_tflops": round(gemm_flop / (gemm_ms * 1e-3) / 1e12, 1) if gemm_ms > 0 else None}
    return out


def gemm_flop_per_iteration(fixture: Any, num_updates: int) -> float:
    """Matrix-multiply FLOPs of one learner iteration (forward and backward), counted by
    torch.utils.flop_counter on an eager, uncompiled twin of the fixture's learner (the compiler changes
    which kernels run, not the products computed); the mean over a policy_frequency cycle of iterations."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    cfg = fixture.cfg
    saved = cfg.algo.algo_params.torch_compile
    cfg.algo.algo_params.torch_compile = False
    try:
        learner, sampler = fixture.setup()
    finally:
        cfg.algo.algo_params.torch_compile = saved
    cycle = max(1, int(cfg.algo.policy_frequency) // max(1, num_updates))
    counter = FlopCounterMode(display=False)
    with counter:
        for _ in range(cycle):
            learner.train_iteration(sampler.sample, num_updates)
    fixture.sync()
    del learner
    if fixture.device.type == "cuda":
        torch.cuda.empty_cache()
    return counter.get_total_flops() / cycle
