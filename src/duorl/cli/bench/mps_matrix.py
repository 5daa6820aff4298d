"""`duorl bench mps`: the MPS on/off matrix (seed 001, Phase 3).

Identical `duorl train` commands but for `training.cuda_process_sharing`, arms interleaved
(off, on, off, on, ...) so that drift hits both; each run >= 300 iterations, the first 50 ignored and
the mean of the last 100 reported; the summary carries each run's MPS evidence from its manifest.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from duorl.cli.bench.report import arm_overrides, check_arms, run_checked, train_command
from duorl.telemetry.metrics_file import read_metrics

FIELDS = {
    "env_steps_per_s": "Perf/env_steps_per_s",
    "iteration_ms": "Perf/iteration_ms",
    "learner_train_ms": "Perf/learner_train_ms",
    "learner_wait_for_collector_ms": "Perf/learner_collector_wait_ms",
    "collector_wait_for_learner_ms": "Perf/collector_learner_wait_ms",
    "collector_env_step_ms": "Perf/collector_env_step_ms",  # eager ticks only
    "collector_tick_ms": "Perf/collector_tick_ms",
    "nan_resets": "Train/nan_resets",
    # data parallel: the slowest rank, the spread between ranks (per-rank jitter), the all-reduce time
    "iteration_ms_slowest_rank": "Perf/iteration_ms_max",
    "iteration_ms_rank_spread": "Perf/iteration_ms_spread",
    "dp_grad_sync_ms": "Perf/dp_grad_sync_ms",  # eager DP: time in gradient all-reduces per iteration
    "dp_allreduce_round_ms": "Perf/dp_allreduce_round_ms",  # DP graph: one eager all-reduce round, measured
}
IGNORE_FIRST, REPORT_LAST = 50, 100
ARMS = ("off", "mps")  # in the order they run, interleaved over the repeats


@dataclass(frozen=True)
class MatrixSpec:
    algo: str
    task: str
    sim: str | None
    iterations: int = 300
    repeats: int = 2
    overrides: tuple[str, ...] = ()

    def check(self) -> None:
        if self.iterations < IGNORE_FIRST + REPORT_LAST:
            raise ValueError(f"--iterations must be >= {IGNORE_FIRST + REPORT_LAST} (first {IGNORE_FIRST} ignored, last {REPORT_LAST} reported)")
        if self.repeats < 1:
            raise ValueError("--repeats must be >= 1")

    def arm_settings(self, arm: str) -> tuple[str, ...]:
        mps = ("training.cuda_process_sharing=mps",) if arm == "mps" else ()
        return (*self.overrides, *mps)

    def command(self, arm: str, log_dir: Path) -> list[str]:
        return train_command(self.algo, self.task, self.sim, log_dir, self.iterations, *self.arm_settings(arm))

    def preflight(self) -> None:
        """The arguments (check), then both arms' runs as `duorl train` would check them, MPS's
        prerequisites included: before the off arm's minutes, not after them."""
        self.check()
        check_arms(self.algo, self.task, self.sim,
                   {arm: arm_overrides(self.iterations, *self.arm_settings(arm)) for arm in ARMS})


def summarize_run(run_dir: Path, ignore_first: int = IGNORE_FIRST, report_last: int = REPORT_LAST) -> dict[str, Any]:
    """The means over the run's last `report_last` iterations (never the first `ignore_first`). Windows
    are counted in iterations, not log rows: a row stands for the `training.log_interval` iterations up
    to its own, so an override of the interval (every `key=value` reaches the runs) keeps the window."""
    all_rows = read_metrics(run_dir / "metrics.jsonl")
    last = max((r["iteration"] for r in all_rows), default=0)
    start = max(ignore_first, last - report_last)
    rows = [r for r in all_rows if r["iteration"] > start]
    summary = json.loads((run_dir / "run_summary.json").read_text())
    out: dict[str, Any] = {"status": summary["status"], "iterations_reported": last - start if rows else 0,
                           "log_rows_reported": len(rows)}
    for name, key in FIELDS.items():
        vals = [r[key] for r in rows if isinstance(r.get(key), (int, float))]
        out[name] = sum(vals) / len(vals) if vals else None
    out["cuda_process_sharing"] = summary.get("runtime_manifest", {}).get("cuda_process_sharing")
    out["world_size"] = summary.get("runtime_manifest", {}).get("world_size")
    return out


def run_matrix(spec: MatrixSpec, workdir: Path, run: Callable[[list[str]], int] | None = None) -> dict[str, Any]:
    spec.check()
    run = run or (lambda cmd: subprocess.run(cmd).returncode)
    runs: dict[str, list[dict[str, Any]]] = {arm: [] for arm in ARMS}
    commands: dict[str, str] = {}
    for r in range(spec.repeats):
        for arm in ARMS:
            d = workdir / f"{arm}_{r}"
            cmd = spec.command(arm, d)
            commands.setdefault(arm, " ".join(cmd[1:]).replace(str(d), "RUN_DIR"))
            print(f"[bench mps] {arm} repeat {r + 1}/{spec.repeats}", file=sys.stderr, flush=True)
            rc = run(cmd)
            result = summarize_run(d) if (d / "metrics.jsonl").exists() else {"status": "failed"}
            result["returncode"] = rc
            runs[arm].append(result)
    arms = {}
    for arm, rs in runs.items():
        arms[arm] = {name: mean_of([x.get(name) for x in rs]) for name in FIELDS}
        arms[arm]["completed"] = all(x.get("status") == "completed" for x in rs)
        arms[arm]["mps_validated_every_run"] = all(
            (x.get("cuda_process_sharing") or {}).get("validated", False) for x in rs
        )
    off, on = arms["off"]["env_steps_per_s"], arms["mps"]["env_steps_per_s"]
    return {
        "algo": spec.algo,
        "task": spec.task,
        "sim": spec.sim,
        "iterations": spec.iterations,
        "repeats": spec.repeats,
        "ignore_first": IGNORE_FIRST,
        "report_last": REPORT_LAST,
        "commands": commands,
        "arms": arms,
        "runs": runs,
        "throughput_gain": (on / off - 1.0) if off and on else None,
    }


def mean_of(values: list[Any]) -> float | None:
    vals = [v for v in values if isinstance(v, (int, float))]
    return sum(vals) / len(vals) if vals else None


def bench_mps_main(algo: str, task: str, sim: str | None, iterations: int, repeats: int, out: str | None, overrides: list[str]) -> int:
    spec = MatrixSpec(algo, task, sim, iterations, repeats, tuple(overrides))
    result = run_checked(spec.preflight, lambda workdir: run_matrix(spec, workdir), "duorl-bench-mps-", out)
    if result is None:
        return 2
    return 0 if result["arms"]["off"]["completed"] and result["arms"]["mps"]["completed"] else 1
