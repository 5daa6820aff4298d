"""Per-launch cost of small CUDA kernels, eager and inside a CUDA graph, in one process (GPU machine):

    python3 benchmarks/scripts/mps_launch_overhead.py [--launches 20000] [--out FILE.json]

Run it once as a plain CUDA client and once as a client of an MPS daemon (CUDA_MPS_PIPE_DIRECTORY set to
a running daemon's pipe directory), then compare `eager_us_per_launch` and `graph_us_per_kernel`.
Why: the eager-arm MPS matrix (benchmarks/2026-11-29_mps_eager_h200/) found MPS slowing an eager,
launch-bound duo by 21%; a higher cost per launch under MPS would explain that.
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from duorl.cli.bench.report import emit


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--launches", type=int, default=20000)
    p.add_argument("--out", default=None)
    a = p.parse_args()
    x = torch.zeros(256, device="cuda")
    for _ in range(100):  # warm up the context and the kernel
        x.add_(1.0)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(a.launches):
        x.add_(1.0)
    torch.cuda.synchronize()
    eager = (time.perf_counter() - t0) / a.launches * 1e6
    per_graph = 1000
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        with torch.cuda.graph(g, stream=s):
            for _ in range(per_graph):
                x.add_(1.0)
    torch.cuda.current_stream().wait_stream(s)
    g.replay()
    torch.cuda.synchronize()
    replays = max(1, a.launches // per_graph)
    t0 = time.perf_counter()
    for _ in range(replays):
        g.replay()
    torch.cuda.synchronize()
    graph = (time.perf_counter() - t0) / (replays * per_graph) * 1e6
    out = {"mps_pipe": os.environ.get("CUDA_MPS_PIPE_DIRECTORY"), "gpu": torch.cuda.get_device_name(0),
           "launches": a.launches, "eager_us_per_launch": round(eager, 3), "graph_us_per_kernel": round(graph, 3)}
    emit(out, a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
