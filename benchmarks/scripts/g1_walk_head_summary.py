"""Summarises the G1 walking runs of one lease (issue #32's table): for each run folder written by
g1_walk_fastsac_h200.sh (metrics.jsonl.gz, run_summary.json, and t0/first: the command's start as epoch
seconds and the seconds from it to the first metrics row), the start-up, the walking criterion at the end
and at 5 minutes from the command, and the steady-state rates.

    python3 benchmarks/scripts/g1_walk_head_summary.py benchmarks/2026-12-02_g1_walk_head_h200/walk10 ...

Criterion (issue #3): over the last 100 iterations (20 logged rows at log_interval=5) mean episode length
>= 800 (of 1000) and mean Task/lin_vel_error <= 0.3 m/s. Note: metrics.jsonl.gz may be thinned (the last
100 rows and every 10 s are kept), so the 5-minute window is read from the rows present before it.
"""

from __future__ import annotations

import gzip
import json
import statistics
import sys
from pathlib import Path


def _window(rows: list[dict]) -> dict[str, float]:
    last = rows[-20:]
    out = {}
    for k in ("Train/mean_episode_length", "Task/lin_vel_error", "Eval/lin_vel_error", "Eval/mean_episode_length"):
        vals = [r[k] for r in last if k in r]
        out[k] = statistics.fmean(vals) if vals else float("nan")
    return out


def _walks(w: dict[str, float]) -> bool:
    return w["Train/mean_episode_length"] >= 800 and w["Task/lin_vel_error"] <= 0.3


def summarise(folder: Path) -> dict:
    rows = [json.loads(line) for line in gzip.open(folder / "metrics.jsonl.gz", "rt")]
    rows = [r for r in rows if "Task/lin_vel_error" in r]
    first = float(next(folder.glob("*first")).read_text())
    # wall_s counts from the run's own start; the command started `offset` seconds earlier
    offset = first - rows[0]["wall_s"]
    summary = json.loads((folder / "run_summary.json").read_text())
    end = _window(rows)
    at5 = [r for r in rows if r["wall_s"] + offset <= 300.0]
    w5 = _window(at5) if len(at5) >= 20 else None
    steady = [r for r in rows if r["wall_s"] >= rows[0]["wall_s"] + 60.0]
    rate = (steady[-1]["env_steps"] - steady[0]["env_steps"]) / (steady[-1]["wall_s"] - steady[0]["wall_s"])
    med = lambda k: statistics.median(r[k] for r in steady if k in r)  # noqa: E731
    return {
        "run": folder.name,
        "command_to_first_row_s": round(first, 1),
        "command_to_run_start_s": round(offset, 1),
        "graph_capture_s": summary["runtime_manifest"]["whole_cycle_cuda_graph"].get("capture_s"),
        "end_wall_s": round(summary["wall_s"] + offset, 1),
        "end_window": {k: round(v, 3) for k, v in end.items()},
        "walks_at_end": _walks(end),
        "window_at_5min_from_command": None if w5 is None else {k: round(v, 3) for k, v in w5.items()},
        "walks_at_5min": None if w5 is None else _walks(w5),
        "steady_env_steps_per_s": round(rate),
        "median_iteration_ms": round(med("Perf/iteration_ms"), 2),
        "median_collector_tick_ms": round(med("Perf/collector_tick_ms"), 2),
        "median_weight_publish_ms": round(med("Perf/weight_publish_ms"), 2),
        "median_learner_collector_wait_ms": round(med("Perf/learner_collector_wait_ms"), 3),
        "median_collector_learner_wait_ms": round(med("Perf/collector_learner_wait_ms"), 2),
        "final_metrics_learner_train_ms": summary["final_metrics"].get("Perf/learner_train_ms"),
    }


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print(json.dumps(summarise(Path(arg)), indent=1))
