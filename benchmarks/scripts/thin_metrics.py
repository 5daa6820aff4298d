"""Thins a committed metrics.jsonl.gz in place so that benchmarks/ stays small (the size rule in
benchmarks/README.md). Kept, unchanged: the row nearest to every 10 s of wall time (what the course tables
of g1_walk_fastsac_h200.sh sample, every 60 s, and the READMEs' 10 s samples read), every 20th row (every
100 iterations at log_interval=5, for the curves), and the last 100 rows (what `duorl metrics --last N`
summarized). The full file stays in git history (the commit before the thinning).

    python3 benchmarks/scripts/thin_metrics.py benchmarks/<folder>/metrics.jsonl.gz [...]
"""
from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

SAMPLE_S = 10.0
EVERY = 20
LAST = 100


def kept_rows(lines: list[str]) -> list[str]:
    walls = [json.loads(line).get("wall_s") for line in lines]
    keep = set(range(0, len(lines), EVERY)) | set(range(max(0, len(lines) - LAST), len(lines)))
    timed = [(w, i) for i, w in enumerate(walls) if w is not None]
    if timed:
        end = max(w for w, _ in timed)
        t = SAMPLE_S
        while t < end + SAMPLE_S:
            keep.add(min(timed, key=lambda wi: abs(wi[0] - t))[1])  # first of equals, as min() picks
            t += SAMPLE_S
    return [lines[i] for i in sorted(keep)]


def main(paths: list[str]) -> None:
    for name in paths:
        path = Path(name)
        with gzip.open(path, "rt") as f:
            lines = f.read().splitlines()
        rows = kept_rows(lines)
        with gzip.open(path, "wt", compresslevel=9) as f:
            f.write("\n".join(rows) + "\n")
        print(f"{path}: {len(lines)} -> {len(rows)} rows, {path.stat().st_size // 1024} KB")


if __name__ == "__main__":
    main(sys.argv[1:])
