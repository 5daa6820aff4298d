"""`duorl train`: wire a validated Config into one duo and a run directory.

This is the application layer: it alone knows the concrete algorithm and task registries, and hands
the runtime plain factories (DESIGN.md §1).
"""

from __future__ import annotations

import datetime as _dt
import functools
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from duorl.config.load import config_hash, config_to_dict
from duorl.config.schema import Config
from duorl.config.validate import (env_device_type, resolve_device, solver_early_exit_enabled, tick_compile_enabled,
                                   tick_graph_enabled)
from duorl.mps.probe import MpsEvidence
from duorl.mps.probe import MpsUnavailable as MpsUnavailableError

SEED_STREAMS = {"learner": 0, "env": 1, "explore": 2, "replay": 3, "play": 4}


def derive_seed(seed: int, stream: str, rank: int = 0) -> int:
    """Independent, reproducible seeds per random stream (and, later, per rank)."""
    return int(np.random.SeedSequence(seed, spawn_key=(SEED_STREAMS[stream], rank)).generate_state(1)[0])


def graph_enabled(cfg: Config, device: torch.device) -> bool:
    """algo.algo_params.whole_cycle_cuda_graph resolved: null = on for a CUDA learner unless the replay
    window is checked per batch (host reads); true was validated to have CUDA."""
    configured = cfg.algo.algo_params.whole_cycle_cuda_graph
    if configured is None:
        return device.type == "cuda" and not cfg.debug.check_replay_window
    return bool(configured) and device.type == "cuda"


def replay_age_bias(algo: Any) -> Any:
    """The runtime's AgeBias for algo.decay_step > 0 (WarpSAC), else None (uniform replay)."""
    if algo.decay_step <= 0:
        return None
    from duorl.runtime.replay import AgeBias

    return AgeBias(algo.decay_step, algo.replay_min_weight, algo.replay_num_buckets)


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

    def checkpoint(self, iteration: int, env_steps: int, final: bool, runtime_state: dict[str, Any]) -> None:
        from duorl.runtime.checkpoint import save_checkpoint

        header = {
            "config_hash": config_hash(self.cfg),
            "algo": self.cfg.algo.name,
            "task": self.cfg.task.name,
            "env_steps": env_steps,
            "collector_state": runtime_state.get("collector") is not None,
            "replay": runtime_state.get("replay") is not None,
        }
        payload = {
            "learner": self.learner.state_dict(),
            # the policy alone, whatever the algorithm: what play and export need
            "policy": self.learner.actor.state_dict(),
            "runtime": runtime_state,
            "config": config_to_dict(self.cfg),
        }
        path = save_checkpoint(self.path / "checkpoints", iteration, payload, header, final=final)
        self.checkpoints.append(path.name)
        if runtime_state.get("replay") is not None:
            self.manifest["checkpoint_replay_bytes"] = runtime_state["replay_bytes"]

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
    from duorl.envs.registry import make_task, make_vec_env
    from duorl.runtime.duo import Duo, DuoSettings
    from duorl.telemetry.summary import device_record, host_record, package_versions, write_json_atomic

    t0 = time.perf_counter()
    from duorl.envs.motion.load import check_motion_file  # a clip that cannot be used fails here, first

    for warning in check_motion_file(cfg.task):
        print(f"duorl: warning: {warning}", file=sys.stderr, flush=True)
    device = torch.device(resolve_device(cfg))
    tr, algo = cfg.training, cfg.algo
    mps = _probe_mps(cfg, device)  # fails closed before anything is built
    if isinstance(mps, int):
        return mps
    if tr.torch_threads > 0:
        torch.set_num_threads(tr.torch_threads)
    task = make_task(cfg.task)  # unbound: shapes and state names, no simulation
    spec = task.spec
    run_dir = Path(tr.log_dir) if tr.log_dir else default_run_dir(cfg)
    run_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(run_dir / "run_config.json", config_to_dict(cfg))
    print(f"duorl: run directory {run_dir}", flush=True)

    resume_state, resumed_from, learner_state = None, None, None
    if tr.resume:  # checked before the learner is built: a checkpoint this run cannot continue fails first
        from duorl.resume import load_resume

        ckpt_path, learner_state, resume_state = load_resume(tr.resume, config_to_dict(cfg), _task_state_keys(task))
    if device.type == "cuda":
        # the learner's CUDA graph captures on the current device's stream and registers its default
        # generator: on any GPU but the first, both must be the run's (the collector sets its own)
        torch.cuda.set_device(device)
    torch.manual_seed(derive_seed(tr.seed, "learner"))
    learner = make_learner(algo, spec, device, derive_seed(tr.seed, "learner"))
    if tr.resume:
        learner.load_state_dict(learner_state)
        resumed_from = {
            "checkpoint": str(ckpt_path),
            "iteration": resume_state.iteration,
            "collector_state": resume_state.collector is not None,
            "replay": resume_state.replay is not None,
        }
        note = "" if resume_state.replay is not None else " (replay not in the checkpoint: refilling it first)"
        print(f"duorl: resuming {ckpt_path} at iteration {resume_state.iteration}{note}", flush=True)
    # the env runs where its backend runs: mujoco on CPU threads, mjwarp on the duo's device
    env_device = str(device) if env_device_type(cfg) != "cpu" else "cpu"
    tick_graph = tick_graph_enabled(cfg, env_device)
    tick_compile = tick_compile_enabled(cfg, env_device, tick_graph)
    early_exit = solver_early_exit_enabled(cfg, tick_graph)
    env_factory = functools.partial(
        make_vec_env,
        cfg.task,
        cfg.sim,
        tr.num_envs,
        env_device,
        derive_seed(tr.seed, "env"),
        tr.nan_guard.enabled,
        cfg.debug.nan_inject_step,
        compile=tick_compile,
        solver_early_exit=early_exit,
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
        snapshot_dir=str(run_dir / "checkpoints"),
        nan_dump_path=str(run_dir / "nan_first_state.pt") if tr.nan_guard.enabled else None,
        checkpoint_replay=tr.checkpoint_replay,
        whole_cycle_cuda_graph=graph_enabled(cfg, device),
        replay_age_bias=replay_age_bias(algo),
        tick_cuda_graph=tick_graph,
        max_wall_s=tr.max_wall_minutes * 60.0 if tr.max_wall_minutes is not None else None,
        eval_envs=tr.eval_envs,
    )
    (run_dir / "checkpoints").mkdir(exist_ok=True)
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
            # "enabled": the resolved setting; "active" (updated after the run): a captured graph ran
            "whole_cycle_cuda_graph": {
                "configured": algo.algo_params.whole_cycle_cuda_graph,
                "enabled": settings.whole_cycle_cuda_graph,
                "active": False,
            },
            # "active" (updated after the run): the collector replayed a captured tick
            "collector_tick_cuda_graph": {
                "configured": cfg.sim.tick_cuda_graph,
                "enabled": settings.tick_cuda_graph,
                "active": False,
                # sim.tick_compile: the step's tensor code compiled into fused kernels
                "compiled": {"configured": cfg.sim.tick_compile, "enabled": tick_compile},
                # sim.solver_early_exit: MuJoCo Warp's solver loop as a conditional node of the tick graph
                "solver_early_exit": {"configured": cfg.sim.solver_early_exit, "enabled": early_exit},
            },
            "max_wall_minutes": tr.max_wall_minutes,
            "cuda_process_sharing": {"configured": tr.cuda_process_sharing, "effective": None},
            "dp_gradient_wire_dtype": tr.dp_gradient_wire_dtype,
            "env_spec": spec.record(),
            "resumed_from": resumed_from,
        }
    )
    reporter.manifest["cuda_process_sharing"] = _mps_manifest(tr.cuda_process_sharing, mps)
    # MPS fails open: once both processes hold a CUDA context, prove they are the daemon's clients
    on_ready = functools.partial(_verify_mps, mps) if mps.configured == "mps" else None
    duo = Duo(settings, spec, learner, env_factory, actor_factory, reporter, resume=resume_state, on_collector_ready=on_ready)
    try:
        result = duo.run()
    except MpsUnavailableError as e:
        reporter.finish("failed", duo._done_iterations, 0, time.perf_counter() - t0, error=str(e))
        print(f"error: {e}", file=sys.stderr)
        return 2
    except BaseException as e:
        reporter.finish("failed", duo._done_iterations, 0, time.perf_counter() - t0, error=repr(e))
        raise
    if result.graph is not None:
        reporter.manifest["whole_cycle_cuda_graph"].update(result.graph)
    reporter.manifest["collector_tick_cuda_graph"]["active"] = result.tick_graph_active
    extra: dict[str, Any] = {}
    if result.error:
        extra["error"] = result.error
    if result.wall_limited:
        extra["stopped_by"] = f"training.max_wall_minutes={cfg.training.max_wall_minutes}"
    if (run_dir / "nan_first_state.pt").exists():
        extra["nan_first_state"] = "nan_first_state.pt"
    if cfg.debug.check_replay_window:
        extra["replay_window_check"] = {
            "samples_checked": result.replay_samples_checked,
            "violations": result.replay_window_violations,
        }
    if result.status != "failed":
        extra.update(_after_training(cfg, run_dir, learner, spec))
    reporter.finish(result.status, result.iterations, result.env_steps, result.wall_s, **extra)
    if result.status == "failed":
        print(f"duorl: error: {result.error}", file=sys.stderr, flush=True)
        print(f"duorl: run directory {run_dir} (status failed; last checkpoint kept)", file=sys.stderr)
        return 1
    ret = result.last_metrics.get("Train/mean_episode_return")
    msg = f"duorl: {result.status} {result.iterations} iterations, {result.env_steps:,} env steps in {result.wall_s:.1f} s"
    if ret is not None:
        msg += f"; mean episode return {ret:.2f}"
    if result.wall_limited:
        msg += f" (stopped by training.max_wall_minutes={cfg.training.max_wall_minutes})"
    print(msg, flush=True)
    print(f"duorl: run directory {run_dir}", flush=True)
    return 0


def _task_state_keys(task: Any) -> tuple[str, ...]:
    """The names of the task's resume state (tasks.base: the optional state_keys()), none if it has none."""
    keys = getattr(task, "state_keys", None)
    return tuple(keys()) if keys is not None else ()


def _after_training(cfg: Config, run_dir: Path, learner: Any, spec: Any) -> dict[str, Any]:
    """Export and post-train play, as configured; their results go into run_summary.json."""
    out: dict[str, Any] = {}
    if cfg.training.export_onnx:
        from duorl.export import export_policy

        out["export"] = export_policy(learner.actor, spec.actor_obs_dim, run_dir / "export")
        print(f"duorl: exported {out['export']['onnx']} and {out['export']['safetensors']}", flush=True)
    if not cfg.training.no_play:
        from duorl.play import evaluate

        r = evaluate(run_dir, episodes=8)
        out["play"] = r.__dict__
        print(f"duorl: play: mean return {r.mean_return:.3f} over {r.episodes} episodes (deterministic)", flush=True)
    return out


def _probe_mps(cfg: Config, device: torch.device) -> MpsEvidence | int:
    """MPS mode's prerequisites, checked before anything is built; an int is the exit code of a
    failed check (its message already printed)."""
    from duorl.mps.probe import RealHost, pipe_directory, probe_mps

    if cfg.training.cuda_process_sharing is not None:
        # the spawned collector inherits this, so both processes talk to the same daemon
        os.environ.setdefault("CUDA_MPS_PIPE_DIRECTORY", pipe_directory())
    try:
        # null mode returns at once, touching nothing
        return probe_mps(cfg.training.cuda_process_sharing, str(device), str(device), RealHost())
    except MpsUnavailableError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def _verify_mps(evidence: MpsEvidence, collector_pid: int) -> dict[str, Any]:
    from duorl.mps.probe import RealHost, verify_clients

    verified = verify_clients(evidence, os.getpid(), collector_pid, RealHost())
    return {"cuda_process_sharing": _mps_manifest(evidence.configured, verified)}


def _mps_manifest(configured: str | None, evidence: MpsEvidence | None) -> dict[str, Any]:
    """Per-rank evidence plus one host-level server record: data parallel adds ranks, not fields."""
    import platform

    ranks = [evidence.to_dict()] if evidence is not None else []
    server = None
    if evidence is not None and evidence.configured is not None:
        server = {"host": platform.node(), "server_pid": evidence.server_pid, "control_pipe": evidence.control_pipe}
    return {
        "configured": configured,
        "effective": evidence.effective if evidence is not None else None,
        "validated": bool(evidence is not None and evidence.validated),
        "ranks": ranks,
        "server": server,
    }
