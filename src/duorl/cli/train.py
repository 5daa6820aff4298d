"""`duorl train`: wire a validated Config into one duo (one rank of a data-parallel run) and a run directory.

This is the application layer: it alone knows the concrete algorithm and task registries, and hands
the runtime plain factories (docs/design.md §1). Without data parallel one process runs the whole job. As
a rank (started by `duorl.distributed.launch` or torchrun), the process first agrees with its peers on the
configuration, the MPS verdicts, the checkpoint and the memory it needs, all before its collector
builds anything; rank 0 alone holds the run directory.

The steps live in cli/train_steps/, one module each, and share one RunContext (cli/run_context.py): `_run`
calls them in order, each reads what the ones before it set, sets its own part and goes down to the layers
below it; this module only starts the run (the compile caches, MPS, the device, the ranks' process groups)
and ends it (a rank's exit, cli/rank_exit.py).
"""

from __future__ import annotations

import shutil
import sys
import time
from typing import Any

import torch

from duorl.cli.rank_exit import exit_now, leave_rank
from duorl.cli.early_stop import say_stopped
from duorl.cli.run_context import Place, RunContext
from duorl.cli.train_steps.checks import check
from duorl.cli.train_steps.collector_env import start_collector_env
from duorl.cli.train_steps.duo import build_duo
from duorl.cli.train_steps.finish import finish, finish_abandoned
from duorl.cli.train_steps.learner import build_learner
from duorl.cli.train_steps.run_dir import claim
from duorl.config.devices import resolve_device
from duorl.config.schema import Config
from duorl.distributed.launch import rank_env
from duorl.envs.task_sources import source_of
from duorl.gpu.compiling import use_persistent_compile_caches
from duorl.gpu.torch_internals import compile_seconds
from duorl.mps.session import MpsSession
from duorl.runtime.atomic_files import WriteFailed
from duorl.runtime.prestart import PrestartedCollector
from duorl.runtime.outcome import exit_code
from duorl.runtime.stop_signals import early_stop_signal
from duorl.startup_phases import PHASES

# Imported where they are used (here and in the steps), on purpose: the data-parallel modules
# (duorl.distributed.group, agreement, learner_join, grad_sync, collective_wait, dp_coordinator) only on a
# rank of a data-parallel run; cli/resume.py only with training.resume; cli/export.py (the ONNX exporter)
# only with training.export_onnx. A single run's learner does not pay for them while its prestarted
# collector starts beside it.


def train(cfg: Config, prestarted: PrestartedCollector | None = None) -> int:
    """Run one training job, or this process's rank of it; returns the exit code (0 completed or
    interrupted, 1 failed, 2 refused). `prestarted`: its collector's process, started before the
    configuration was read (`duorl train`, cli/main.py); None starts it here."""
    if PHASES.last("imports") is None:  # not timed by `duorl train` (cli/main.py): a rank, a warm-up, a script
        PHASES.add_since_last("config and imports")
    PHASES.add_counter("torch.compile", compile_seconds)  # each phase says how much of it compiling took
    # first: before anything imports torch._dynamo; the collector inherits the environment
    use_persistent_compile_caches()
    renv = rank_env()
    tr = cfg.training
    mps = MpsSession(tr.cuda_process_sharing, rank=renv.rank if renv else 0, world_size=renv.world_size if renv else 1,
                     local_rank=renv.local_rank if renv else 0)
    mps.prepare_environment()  # before CUDA initialises: the collector inherits the pipe directory
    device = torch.device(resolve_device(cfg))
    ctx = None
    if renv is not None:
        from duorl.distributed.group import DistContext

        ctx = DistContext.initialize(renv, device, tr.dp_timeout_s, tr.dp_startup_timeout_s)
    try:
        code = _train(cfg, device, mps, ctx, prestarted)
    except WriteFailed as e:
        if ctx is None:  # outside the duo's loop (the run directory's first files): no traceback
            print(f"duorl: error: {e}", file=sys.stderr, flush=True)
            return exit_code("failed")
        leave_rank(e, renv, ctx)
        raise
    except BaseException as e:
        if ctx is not None:
            leave_rank(e, renv, ctx)
        raise
    if ctx is None:
        return code
    if code == 0:
        ctx.destroy()  # every graph holding NCCL work went with the duo
        return 0
    # a failed rank leaves without collectives: its peers are elsewhere, and the launcher ends them
    exit_now(code)
    return code


def _train(cfg: Config, device: torch.device, mps: MpsSession, ctx: Any,
           prestarted: PrestartedCollector | None) -> int:
    """Prepare the collector's process (start it, if nobody did), then run the steps on one RunContext; a
    collector that no duo took is cancelled (it built at most its env)."""
    t0 = time.perf_counter()
    # its imports ahead go on beside the checks, its env beside the learner's build; the environment this
    # process set up (compile caches, MPS, a rank's devices) goes with them
    pre = prestarted if prestarted is not None else PrestartedCollector()
    pre.prepare(_collector_preimports(cfg))
    run = RunContext(cfg, device, mps, Place.of(ctx), t0, pre)
    try:
        return _run(run)
    finally:
        run.prestarted.cancel()  # a run refused, failed or stopped before its duo started


def _collector_preimports(cfg: Config) -> tuple[str, ...]:
    """What the collector imports while its learner checks (runtime/collector.py, collector_entry): the
    registries its arguments name, and the simulator (Warp's loads counted first, then MuJoCo Warp, or mjlab)."""
    out = ("duorl.envs.registry", "duorl.algos.registry")
    if source_of(cfg.task.name).kind == "mjlab":
        return (*out, "duorl.envs.backends.warp_loads:install", "mujoco_warp", "duorl.envs.mjlab.loader:registry")
    if cfg.sim.name == "mjwarp":
        return (*out, "duorl.envs.backends.warp_loads:install", "mujoco_warp")
    return out


def _run(run: RunContext) -> int:
    """The steps in order: checks, run directory, the collector's env (built from here on, beside the
    learner's build), learner, reporting and the duo, the duo's run, the outcome."""
    with PHASES.phase("checks"):
        code = check(run)
    if code is not None:
        return code
    if _stopped_before_start(run.place):
        return 0
    with PHASES.phase("run directory"):
        claim(run)
    with PHASES.phase("collector's env sent"):
        start_collector_env(run)
    with PHASES.phase("learner"):
        build_learner(run)
    with PHASES.phase("reporting"):
        build_duo(run)  # where its results go first (train_steps/reporting.py)
    try:
        result = run.duo.run()
    except BaseException as e:
        if run.directory is not None:
            finish_abandoned(run.directory, run.duo.done_iterations, time.perf_counter() - run.t0, e)
        raise
    finally:
        if not run.place.lead:
            shutil.rmtree(run.snapshot_dir, ignore_errors=True)
    return finish(run, result)


def _stopped_before_start(place: Place) -> bool:
    """A stop that reached any rank before its run directory exists stops them all here."""
    stop_now = early_stop_signal() is not None
    if place.ctx is not None:
        stop_now = any(place.ctx.all_gather(stop_now, "agreeing whether to start", group="startup"))
    if stop_now and place.lead:
        say_stopped()
    return stop_now


