"""The run directory (docs/design.md §8): the Reporter of one run, which writes its metrics, progress,
checkpoints and summary. Under data parallel only rank 0 holds one."""

from __future__ import annotations

import datetime as _dt
import re
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from duorl.config.load import config_hash, config_to_dict
from duorl.config.schema import Config

if TYPE_CHECKING:  # torch is imported by whoever builds a run: refusals before that do without it
    import torch


def default_run_dir(task_name: str, algo_name: str) -> Path:
    """runs/<task>-<algo>-<time>, or with -2, -3, ... when that exists: a name free now (created
    atomically later by run_dir_claim.claim_run_dir, which moves on to the next if it was taken since)."""
    from duorl.telemetry.run_dir_claim import unused_name

    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    task = re.sub(r"[^A-Za-z0-9_.\-]", "_", task_name)  # names with a colon: an import path, an mjlab id
    return unused_name(Path("runs") / f"{task}-{algo_name}-{stamp}")


class RunDirectory:
    """The Reporter of one run: metrics, progress, checkpoints and the summary (docs/design.md §8)."""

    def __init__(self, cfg: Config, run_dir: Path, learner: Any, device: torch.device) -> None:
        from duorl.telemetry.progress import ProgressLine
        from duorl.telemetry.writers import MetricsWriter

        self.cfg = cfg
        self.path = run_dir
        self.learner = learner
        self.device = device
        self.metrics = MetricsWriter(run_dir)
        self.progress = ProgressLine(cfg.algo.max_iterations, enabled=cfg.training.progress)
        self.manifest: dict[str, Any] = {}
        self.last: dict[str, float] = {}
        self.checkpoints: list[str] = []
        self.total_env_steps: int | None = None  # the latest count logged or checkpointed (all ranks)
        self._t0 = time.perf_counter()
        from duorl.runtime.process_record import this_process

        # who writes the summary: a later command tells a dead run (no outcome, its process gone) from a live one
        self.process = this_process()
        self.started_at = _dt.datetime.now().isoformat(timespec="seconds")
        # from the start the directory says what it is: a run killed at any point leaves a summary
        self._write_summary("starting", 0, 0, 0.0)

    def started(self, manifest: dict[str, Any]) -> None:
        self.manifest.update(manifest)
        self._write_summary("running", 0, 0, 0.0)

    def log(self, iteration: int, env_steps: int, wall_s: float, metrics: dict[str, float]) -> None:
        from duorl.runtime.atomic_files import write_failed

        try:
            self.metrics.write(iteration, env_steps, wall_s, metrics)
        except OSError as e:  # a full disk ends the run with the cause named (runtime/outcome.py)
            raise write_failed("metrics", self.path / "metrics.jsonl", e) from e
        self.total_env_steps = env_steps
        self.last = metrics
        from duorl.telemetry.metrics_file import NO_EPISODE_YET, RETURN_KEY

        ret = metrics.get(RETURN_KEY)
        parts = [f"{metrics.get('Perf/env_steps_per_s', 0):,.0f} steps/s", f"{metrics['Perf/iteration_ms']:.1f} ms/it"]
        parts.append(f"return {ret:.1f}" if ret is not None else NO_EPISODE_YET)
        self.progress.update(iteration, "  ".join(parts))

    def checkpoint(self, iteration: int, env_steps: int, final: bool, runtime_state: dict[str, Any]) -> None:
        from duorl.runtime.checkpoint import save_checkpoint

        # a data-parallel checkpoint holds every rank's runtime state under "ranks"
        ranks = runtime_state.get("ranks") or [runtime_state]
        header = {
            "config_hash": config_hash(self.cfg),
            "algo": self.cfg.algo.name,
            "task": self.cfg.task.name,
            "env_steps": env_steps,
            "world_size": len(ranks),
            "collector_state": all(r.get("collector") is not None for r in ranks),
            "replay": all(r.get("replay") is not None for r in ranks),
        }
        payload = {
            "learner": self.learner.state_dict(),
            # the policy alone, whatever the algorithm: what play and export need
            "policy": self.learner.actor.state_dict(),
            "runtime": runtime_state,
            "config": config_to_dict(self.cfg),
        }
        path = save_checkpoint(self.path / "checkpoints", iteration, payload, header, final=final)
        self.total_env_steps = env_steps
        self.checkpoints.append(path.name)
        if header["replay"]:
            self.manifest["checkpoint_replay_bytes"] = runtime_state["replay_bytes"]
        if not final:
            # how far the run got, for a run that is killed later (the final summary follows a final one)
            self._write_summary("running", iteration, env_steps, time.perf_counter() - self._t0)

    def _write_summary(self, status: str, iterations: int, env_steps: int, wall_s: float, **extra: Any) -> None:
        from duorl.runtime.atomic_files import write_json

        summary = {
            "status": status,
            "algo": self.cfg.algo.name,
            "task": self.cfg.task.name,
            "sim": self.cfg.sim.name,
            "iterations": iterations,
            "max_iterations": self.cfg.algo.max_iterations,
            "env_steps": env_steps,
            "wall_s": round(wall_s, 3),
            "final_metrics": self.last,
            "checkpoints": self.checkpoints,
            "last_checkpoint": f"checkpoints/{self.checkpoints[-1]}" if self.checkpoints else None,
            "runtime_manifest": self.manifest,
            "process": self.process,
            "started_at": self.started_at,
            **extra,
        }
        write_json(self.path / "run_summary.json", summary, "run summary")

    def finish(self, status: str, iterations: int, env_steps: int, wall_s: float, **extra: Any) -> None:
        """The run's outcome first (a small file: on a full disk it is what still fits, and it is what a
        killed finish leaves), then the plots, which only add their names to it."""
        from duorl.telemetry.plots import plot_learning_curves

        self.progress.close()
        try:
            self.metrics.close()
        except OSError as e:  # a full disk: the rows written so far stay
            print(f"duorl: warning: closing the metrics files failed: {e}", file=sys.stderr, flush=True)
        self._write_summary(status, iterations, env_steps, wall_s, **extra)
        try:
            png = plot_learning_curves(self.path)
        except OSError as e:  # a full disk: the outcome is recorded; the plots are not worth a traceback
            print(f"duorl: warning: the learning curves were not drawn: {e}", file=sys.stderr, flush=True)
            return
        if png is not None:
            extra["plots"] = [str(png.relative_to(self.path))]
            self._write_summary(status, iterations, env_steps, wall_s, **extra)
