"""Cold compile time of the compiled g1_walk_flat collector tick on the CPU, and the time of the next ticks:

    TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) .venv/bin/python benchmarks/scripts/tick_compile_time_cpu.py

A fresh TORCHINDUCTOR_CACHE_DIR makes the compile cold. The first tick compiles the env's step tensor
code (sim.tick_compile); on the GPU the same graphs go to Triton instead of C++, so the CPU time is a
proxy for how much dynamo and inductor work a cold start costs (91.5 s on the H200 at commit ad092c5,
benchmarks/2026-11-29_compile_h200/). Output of the committed runs:
benchmarks/2026-11-29_cpu_probes/tick_compile_time_cpu.txt.
"""

from __future__ import annotations

import time

from duorl.cli.bench.collector import build_collector_tick
from duorl.cli.configure import load_config


def main() -> None:
    cfg = load_config("sac", "g1_walk_flat", "mujoco", ["sim.nthread=1"])
    tick = build_collector_tick(cfg, 64, "cpu", cuda_graph=False, compile=True)
    t0 = time.perf_counter()
    tick.run(0, 1)
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    tick.run(1, 20)
    print(f"first tick (cold compile) {first:.1f} s; next 20 ticks {1e3 * (time.perf_counter() - t0) / 20:.1f} ms each")


if __name__ == "__main__":
    main()
