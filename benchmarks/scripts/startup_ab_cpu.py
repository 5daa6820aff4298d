"""Two trees' start-up, alternated: `duorl train` on the CPU, seconds from the command to its first rows.

    python benchmarks/scripts/startup_ab_cpu.py OUT.json PAIRS BEFORE_SRC AFTER_SRC -- key=value ...

Each arm is a fresh `python -m duorl train --task g1_walk_flat --sim mujoco` with the given overrides
(a run directory under a temporary directory), run from BEFORE_SRC or AFTER_SRC (both trees must write
startup.json, duorl/startup_phases.py); the arms alternate so that the machine's load falls on both alike.
OUT.json holds every arm's milestones (seconds from the command to the first metrics row on collected
ticks, and to the first update where the tree writes startup.json, with that file) and the medians; a
table is printed.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

MILESTONES = ("first row on collected ticks", "first update")


def _first_row(metrics: str, at_least: int) -> bool:
    try:
        with open(metrics) as f:
            return any(json.loads(line).get("iteration", 0) >= at_least for line in f if line.endswith("\n"))
    except (OSError, ValueError):
        return False


def arm(src: str, overrides: list[str]) -> dict:
    """One run; seconds from the command to its metrics.jsonl's row of iteration 2 (learner iteration 1,
    the first on the collector's ticks: polled every 10 ms, any tree writes it) and, from startup.json where
    the tree writes one, to the first update."""
    with tempfile.TemporaryDirectory() as tmp:
        run = os.path.join(tmp, "run")
        cmd = [sys.executable, "-m", "duorl", "train", "--task", "g1_walk_flat", "--sim", "mujoco", *overrides,
               "training.log_interval=1", f"training.log_dir={run}"]
        load = os.getloadavg()[0]
        t0 = time.time()
        proc = subprocess.Popen(cmd, env=dict(os.environ, PYTHONPATH=src), stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        first_row = float("nan")
        while proc.poll() is None:
            if first_row != first_row and _first_row(os.path.join(run, "metrics.jsonl"), 2):
                first_row = time.time() - t0
            time.sleep(0.01)
        err = proc.stderr.read() if proc.stderr else ""
        if proc.returncode != 0:
            raise SystemExit(f"{src} failed:\n{err[-3000:]}")
        path = os.path.join(run, "startup.json")
        rec = json.load(open(path)) if os.path.exists(path) else None
    row = {"src": src, "load_1min": load, "first row on collected ticks": first_row, "first update": float("nan")}
    if rec is not None:
        ends = {p["name"]: p["end_s"] for p in rec["learner"]}
        row["first update"] = ends.get("first update", float("nan")) + rec["command_start"] - t0
        row["startup"] = rec
    return row


def main() -> None:
    sep = sys.argv.index("--")
    out_path, pairs, before, after = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    overrides = sys.argv[sep + 1:]
    rows = []
    for i in range(pairs):
        for src in ((before, after) if i % 2 == 0 else (after, before)):
            r = arm(src, overrides)
            rows.append(r)
            print(f"{'before' if src == before else 'after ':6s} " + "  ".join(f"{m} {r[m]:6.2f} s" for m in MILESTONES)
                  + f"  load {r['load_1min']:.1f}", flush=True)
    med = {name: {m: statistics.median(r[m] for r in rows if r["src"] == src) for m in MILESTONES}
           for name, src in (("before", before), ("after", after))}
    ratio = {m: med["after"][m] / med["before"][m] for m in MILESTONES}
    with open(out_path, "w") as f:
        json.dump({"command_overrides": overrides, "pairs": pairs, "before": before, "after": after,
                   "median_s": med, "ratio_after_over_before": ratio, "cpu_count": os.cpu_count(), "rows": rows}, f,
                  indent=1)
    for m in MILESTONES:
        print(f"median {m}: before {med['before'][m]:.2f} s, after {med['after'][m]:.2f} s (ratio {ratio[m]:.3f})")


if __name__ == "__main__":
    main()
