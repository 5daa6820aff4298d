"""`duorl train`: wire a validated Config into one duo and a run directory.

This is the application layer: it alone knows the concrete algorithm and task registries, and hands
the runtime plain factories (DESIGN.md §1).
"""

from __future__ import annotations

import datetime as _dt
import functools
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from duorl.config.load import config_hash, config_to_dict
from duorl.config.schema import Config
from duorl.config.validate import resolve_device

SEED_STREAMS = {"learner": 0, "env": 1, "explore": 2, "replay": 3}


def derive_seed(seed: int, stream: str, rank: int = 0) -> int:
    """Independent, reproducible seeds per random stream (and, later, per rank)."""
    return int(np.random.SeedSequence(seed, spawn_key=(SEED_STREAMS[stream], rank)).generate_state(1)[0])


def default_run_dir(cfg: Config) -> Path:
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{cfg.task.name}-{cfg.algo.name}-{stamp}"


class RunDirectory:
    """The Reporter of one run: metrics, progress, checkpoints and the summary (DESIGN.md §8)."""

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

    def started(self, manifest: dict[str, Any]) -> None:
        self.manifest.update(manifest)
        self._write_summary("running", 0, 0, 0.0)

    def log(self, iteration: int, env_steps: int, wall_s: float, metrics: dict[str, float]) -> None:
        self.metrics.write(iteration, env_steps, wall_s, metrics)
        self.last = metrics
        ret = metrics.get("Train/mean_episode_return")
        parts = [f"{metrics.get('Perf/env_steps_per_s', 0):,.0f} steps/s", f"{metrics['Perf/iteration_ms']:.1f} ms/it"]
        if ret is not None:
            parts.append(f"return {ret:.1f}")
        self.progress.update(iteration, "  ".join(parts))

    def checkpoint(self, iteration: int, env_steps: int, final: bool) -> None:
        from duorl.runtime.checkpoint import save_checkpoint

        header = {"config_hash": config_hash(self.cfg), "algo": self.cfg.algo.name, "task": self.cfg.task.name}
        payload = {"learner": self.learner.state_dict(), "env_steps": env_steps}
        path = save_checkpoint(self.path / "checkpoints", iteration, payload, header, final=final)
        self.checkpoints.append(path.name)

    def _write_summary(self, status: str, iterations: int, env_steps: int, wall_s: float, **extra: Any) -> None:
        from duorl.telemetry.summary import write_json_atomic

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
            "runtime_manifest": self.manifest,
            **extra,
        }
        write_json_atomic(self.path / "run_summary.json", summary)

    def finish(self, status: str, iterations: int, env_steps: int, wall_s: float, **extra: Any) -> None:
        from duorl.telemetry.plots import plot_learning_curves

        self.progress.close()
        self.metrics.close()
        png = plot_learning_curves(self.path)
        if png is not None:
            extra["plots"] = [str(png.relative_to(self.path))]
        self._write_summary(status, iterations, env_steps, wall_s, **extra)


def train(cfg: Config) -> int:
    """Run one training job; returns the process exit code (0 completed or interrupted, 1 failed)."""
    from duorl.algos.registry import make_actor, make_learner
    from duorl.envs.registry import env_spec, make_vec_env
    from duorl.runtime.duo import Duo, DuoSettings
    from duorl.telemetry.summary import device_record, host_record, package_versions, write_json_atomic

    t0 = time.perf_counter()
    device = torch.device(resolve_device(cfg))
    tr, algo = cfg.training, cfg.algo
    if tr.torch_threads > 0:
        torch.set_num_threads(tr.torch_threads)
    spec = env_spec(cfg.task)
    run_dir = Path(tr.log_dir) if tr.log_dir else default_run_dir(cfg)
    run_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(run_dir / "run_config.json", config_to_dict(cfg))
    print(f"duorl: run directory {run_dir}", flush=True)

    torch.manual_seed(derive_seed(tr.seed, "learner"))
    learner = make_learner(algo, spec, device, derive_seed(tr.seed, "learner"))
    # the env runs where its backend runs: mujoco on CPU threads, mjwarp on the duo's device
    env_device = str(device) if cfg.sim.name == "mjwarp" else "cpu"
    env_factory = functools.partial(
        make_vec_env,
        cfg.task,
        cfg.sim,
        tr.num_envs,
        env_device,
        derive_seed(tr.seed, "env"),
        tr.nan_guard.enabled,
    )
    actor_factory = functools.partial(make_actor, algo, spec)
    settings = DuoSettings(
        device=str(device),
        num_envs=tr.num_envs,
        env_steps_per_sync=tr.env_steps_per_sync,
        buffer_size=algo.buffer_size,
        max_iterations=algo.max_iterations,
        learning_starts=algo.learning_starts,
        updates_per_step=algo.updates_per_step,
        save_interval=algo.save_interval,
        log_interval=tr.log_interval,
        explore_seed=derive_seed(tr.seed, "explore"),
        replay_seed=derive_seed(tr.seed, "replay"),
        torch_threads=tr.torch_threads,
        collector_delay_ms=cfg.debug.collector_delay_ms,
        learner_delay_ms=cfg.debug.learner_delay_ms,
        check_replay_window=cfg.debug.check_replay_window,
    )
    reporter = RunDirectory(cfg, run_dir, learner, device)
    reporter.manifest.update(
        {
            "world_size": 1,
            "rank": 0,
            "devices": [device_record(device)],
            "env_device": env_device,
            "sim": cfg.sim.name,
            "host": host_record(),
            "versions": package_versions(),
            "whole_cycle_cuda_graph": {"configured": algo.algo_params.whole_cycle_cuda_graph, "active": False},
            "cuda_process_sharing": {"configured": tr.cuda_process_sharing, "effective": None},
            "dp_gradient_wire_dtype": tr.dp_gradient_wire_dtype,
            "env_spec": spec.__dict__,
        }
    )
    duo = Duo(settings, spec, learner, env_factory, actor_factory, reporter)
    try:
        result = duo.run()
    except BaseException as e:
        reporter.finish("failed", duo._done_iterations, 0, time.perf_counter() - t0, error=repr(e))
        raise
    extra: dict[str, Any] = {}
    if result.error:
        extra["error"] = result.error
    if cfg.debug.check_replay_window:
        extra["replay_window_check"] = {
            "samples_checked": result.replay_samples_checked,
            "violations": result.replay_window_violations,
        }
    reporter.finish(result.status, result.iterations, result.env_steps, result.wall_s, **extra)
    if result.status == "failed":
        print(f"duorl: error: {result.error}", file=sys.stderr, flush=True)
        print(f"duorl: run directory {run_dir} (status failed; last checkpoint kept)", file=sys.stderr)
        return 1
    ret = result.last_metrics.get("Train/mean_episode_return")
    msg = f"duorl: {result.status} {result.iterations} iterations, {result.env_steps:,} env steps in {result.wall_s:.1f} s"
    if ret is not None:
        msg += f"; mean episode return {ret:.2f}"
    print(msg, flush=True)
    print(f"duorl: run directory {run_dir}", flush=True)
    return 0
