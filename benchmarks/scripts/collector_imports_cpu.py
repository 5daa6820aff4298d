"""What the spawned collector imports before its first line runs (unpickling its arguments), before and
after the stall recorder left cli/train.py: fresh interpreters, alternated, wall and CPU seconds each.

    python benchmarks/scripts/collector_imports_cpu.py BEFORE_TREE/src AFTER_TREE/src [N]

BEFORE imports what a collector unpickled at 1495da6 (the runtime, both registries, duorl.cli.train);
AFTER the same with duorl.cli.learner_stall in place of duorl.cli.train. Prints JSON: per side the
samples, the medians, and the ratios after/before.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time

COMMON = "duorl.runtime.collector, duorl.runtime.settings, duorl.envs.registry, duorl.algos.registry"
SIDES = {"before": f"import {COMMON}, duorl.cli.train", "after": f"import {COMMON}, duorl.cli.learner_stall"}


def one(src: str, code: str) -> tuple[float, float]:
    """(wall s, CPU s user+system) of a fresh interpreter running `code` with `src` first on the path."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, env=dict(os.environ, PYTHONPATH=src))
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(before_src: str, after_src: str, n: int) -> dict:
    samples: dict[str, list[tuple[float, float]]] = {"before": [], "after": []}
    for _ in range(n):
        samples["before"].append(one(before_src, SIDES["before"]))
        samples["after"].append(one(after_src, SIDES["after"]))
    med = {k: {"wall_s": statistics.median(w for w, _ in v), "cpu_s": statistics.median(c for _, c in v)}
           for k, v in samples.items()}
    return {"code": SIDES, "n": n, "load_average": os.getloadavg(), "samples": samples, "median": med,
            "ratio_after_over_before": {m: med["after"][m] / med["before"][m] for m in ("wall_s", "cpu_s")}}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 10), indent=1))
