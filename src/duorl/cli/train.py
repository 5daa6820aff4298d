"""`duorl train`: wire a validated Config into one duo (one rank of a data-parallel run) and a run directory.

This is the application layer: it alone knows the concrete algorithm and task registries, and hands
the runtime plain factories (docs/design.md §1). Without data parallel one process runs the whole job. As
a rank (started by `duorl.distributed.launch` or torchrun), the process first agrees with its peers on the
configuration, the MPS verdicts, the checkpoint and the memory it needs, all before any collector
starts; rank 0 alone holds the run directory.

The steps share one RunContext (cli/run_context.py): `_run` calls them in order, each reads what the ones
before it set and sets its own part.
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import torch

from duorl.algos.grad_buffers import LocalValidity
from duorl.algos.registry import make_actor, make_learner, network_shape_keys, network_sizes
from duorl.cli.learner_stall import gone_recorder, stall_recorder
from duorl.cli.play import evaluate
from duorl.cli.preflight import preflight
from duorl.cli.run_context import Checked, Place, RunContext
from duorl.config.devices import resolve_device
from duorl.config.errors import ConfigError, InputRefused, format_value
from duorl.config.load import config_to_dict
from duorl.config.schema import Config
from duorl.config.seeding import derive_seed
from duorl.config.switches import Switches, resolve_switches
from duorl.distributed.failure_board import name_the_cause, summary_fields
from duorl.distributed.launch import rank_env, record_rank_failure
from duorl.distributed.rank_scratch import rank_scratch_dir, remove_dead_rank_scratch
from duorl.envs.registry import make_vec_env
from duorl.envs.task_sources import source_of
from duorl.gpu.compiling import compile_cache_dirs, use_persistent_compile_caches
from duorl.gpu.torch_internals import compile_seconds
from duorl.mps.session import MpsSession, MpsVerdict, mps_manifest
from duorl.runtime.atomic_files import WriteFailed
from duorl.runtime.coordination import RankLost, Solo
from duorl.runtime.duo import Duo, PrestartedCollector, StartRefused
from duorl.runtime.memory import MemoryFixes, MemoryNeed, memory_problem
from duorl.runtime.outcome import exit_code, outcome_of
from duorl.runtime.replay import ReplayLayout
from duorl.runtime.settings import DuoSettings
from duorl.runtime.stop_signals import early_stop_signal
from duorl.startup_phases import PHASES
from duorl.telemetry.run_dir_claim import claim_run_dir
from duorl.telemetry.run_directory import RunDirectory, default_run_dir
from duorl.telemetry.summary import device_record, host_record, package_versions, write_json_atomic

# Imported where they are used, on purpose: the data-parallel modules (duorl.distributed.group, agreement,
# grad_sync, collective_wait, dp_coordinator) only on a rank of a data-parallel run; cli/resume.py only with
# training.resume; cli/export.py (the ONNX exporter) only with training.export_onnx. A single run's
# learner does not pay for them while its prestarted collector starts beside it.


def train(cfg: Config) -> int:
    """Run one training job, or this process's rank of it; returns the exit code (0 completed or
    interrupted, 1 failed, 2 refused)."""
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
        code = _train(cfg, device, mps, ctx)
    except WriteFailed as e:
        if ctx is None:  # outside the duo's loop (the run directory's first files): no traceback
            print(f"duorl: error: {e}", file=sys.stderr, flush=True)
            return exit_code("failed")
        _leave_rank(e, renv, ctx)
        raise
    except BaseException as e:
        if ctx is not None:
            _leave_rank(e, renv, ctx)
        raise
    if ctx is None:
        return code
    if code == 0:
        ctx.destroy()  # every graph holding NCCL work went with the duo
        return 0
    # a failed rank leaves without collectives: its peers are elsewhere, and the launcher ends them
    _exit_now(code)
    return code


def _leave_rank(e: BaseException, renv: Any, ctx: Any) -> None:
    """A rank's run that raised: a refusal or a lost peer (or a failed write) is recorded and the rank leaves
    at once with its exit code; anything else is recorded as the learner's failure and raised on."""
    from duorl.distributed.group import RankRefusal

    if isinstance(e, InputRefused):
        # every rank refuses together (RankRefusal) or this rank found its input wrong
        msg = str(e)
        if renv.rank == 0 or not isinstance(e, RankRefusal):
            print(f"error: {msg}", file=sys.stderr, flush=True)
        record_rank_failure(msg, "input")
        _exit_now(exit_code("refused"))
    elif isinstance(e, (RankLost, WriteFailed)):
        outcome = outcome_of(e)
        assert outcome is not None and outcome.failed_part is not None
        msg = f"rank {renv.rank} ({ctx.host}): {e}"
        if outcome.secondary:  # the peer's own record names the cause, on every node (failure_board.py)
            cause = name_the_cause(renv, ctx.host, msg)
            # this node's torchrun reports this rank's error file: the cause, where it is known
            record_rank_failure(cause.message if cause is not None else msg, outcome.failed_part, secondary=True)
            _exit_now(cause.exit_code if cause is not None else outcome.exit_code)
        record_rank_failure(msg, outcome.failed_part)
        print(f"duorl: error: {msg}", file=sys.stderr, flush=True)
        _exit_now(outcome.exit_code)
    else:
        msg = f"rank {renv.rank} ({renv.host}): the learner (pid {os.getpid()}) failed: {type(e).__name__}: {e}"
        record_rank_failure(msg, "learner")


def _exit_now(code: int) -> None:
    """Leave a rank at once, skipping teardown that could wait on a lost peer (NCCL, gloo)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _train(cfg: Config, device: torch.device, mps: MpsSession, ctx: Any) -> int:
    """Start the collector's process, then run the steps on one RunContext; a collector that no duo took is
    cancelled."""
    t0 = time.perf_counter()
    # the collector's interpreter and imports go on beside the checks and the learner's build
    run = RunContext(cfg, device, mps, Place.of(ctx), t0, PrestartedCollector(_collector_preimports(cfg)))
    try:
        return _run(run)
    finally:
        run.prestarted.cancel()  # a run refused or stopped before its duo started: the collector built nothing


def _collector_preimports(cfg: Config) -> tuple[str, ...]:
    """What the collector imports while its learner is built (runtime/collector.py, collector_entry): the
    registries its arguments name, and the simulator (Warp's loads counted first, then MuJoCo Warp, or mjlab)."""
    out = ("duorl.envs.registry", "duorl.algos.registry")
    if source_of(cfg.task.name).kind == "mjlab":
        return (*out, "duorl.envs.backends.warp_loads:install", "mujoco_warp", "duorl.envs.mjlab.loader:registry")
    if cfg.sim.name == "mjwarp":
        return (*out, "duorl.envs.backends.warp_loads:install", "mujoco_warp")
    return out


def _run(run: RunContext) -> int:
    """The steps in order: checks, run directory, learner, reporting and the duo, the duo's run, the outcome."""
    with PHASES.phase("checks"):
        code = _check(run)
    if code is not None:
        return code
    if _stopped_before_start(run.place):
        return 0
    with PHASES.phase("run directory"):
        _claim_run_dir(run)
    with PHASES.phase("learner"):
        _build_learner(run)
    with PHASES.phase("reporting"):
        _reporting(run)
        _build_duo(run)
    try:
        result = run.duo.run()
    except BaseException as e:
        if run.directory is not None:
            _finish_abandoned(run.directory, run.duo.done_iterations, time.perf_counter() - run.t0, e)
        raise
    finally:
        if not run.place.lead:
            shutil.rmtree(run.snapshot_dir, ignore_errors=True)
    return _finish(run, result)


def _finish_abandoned(directory: Any, iterations: int, wall_s: float, error: BaseException) -> None:
    """The summary of a run whose duo raised: a second Ctrl-C (KeyboardInterrupt while the first one's
    stop finished) is `interrupted`, as its exit code 0 says (runtime/outcome.py); anything else `failed`."""
    steps = _total_env_steps(directory, 0)
    outcome = outcome_of(error)
    if outcome is not None and outcome.status == "interrupted":
        directory.finish("interrupted", iterations, steps, wall_s,
                         stopped_by="a second Ctrl-C: stopped at once, without a final checkpoint")
    else:
        directory.finish("failed", iterations, steps, wall_s, error=repr(error))


def _check(run: RunContext) -> int | None:
    """Every check that refuses a run before anything is built, in the order a user meets them (sets
    run.checked); an exit code where the run stops here."""
    cfg, place, tr, ctx = run.cfg, run.place, run.cfg.training, run.place.ctx
    source = source_of(cfg.task.name)
    # the task's first check (a clip that cannot be used) fails here, first (every rank's collector reads it)
    for warning in source.first_check(cfg.task):
        if place.lead:
            print(f"duorl: warning: {warning}", file=sys.stderr, flush=True)
    switches = resolve_switches(cfg, str(run.device), data_parallel=ctx is not None,
                                tick_capturable=source.tick_capturable, steps_in_stages=source.stated.steps_in_stages)
    if ctx is not None:
        from duorl.distributed.agreement import config_mismatch

        configs = ctx.all_gather(config_to_dict(cfg), "comparing the ranks' configurations", group="startup")
        place.agree(config_mismatch(configs), "comparing configurations")
    verdict = run.mps.probe(str(run.device), str(run.device))  # fails closed before anything is built
    if ctx is None and not verdict.ok:
        print(f"error: {verdict.message}", file=sys.stderr)
        return 2
    place.agree(None if verdict.ok else verdict.message, "probing CUDA MPS")
    if tr.torch_threads > 0:
        torch.set_num_threads(tr.torch_threads)
    checked = run.checked = _check_task(run, source, switches, verdict)
    if tr.resume:  # checked before the learner is built: a checkpoint this run cannot continue fails first
        checked.resume_state, checked.learner_state, checked.resumed_from = _load_resume(run)
        if not checked.resumed_from["collector_state"]:  # the env starts afresh: say what of it training loses
            checked.resumed_from["restarts"] = source.resume_restarts(cfg.task)
            for line in checked.resumed_from["restarts"] if place.lead else ():
                print(f"duorl: warning: training.resume: {line}", file=sys.stderr, flush=True)
    spec = checked.spec
    layout = ReplayLayout(tr.num_envs, cfg.algo.buffer_size, spec.actor_obs_dim, spec.critic_obs_dim, spec.action_dim)
    place.agree(_memory_problem(run, layout.nbytes()), "checking memory for the replay ring and the networks")
    return None


def _check_task(run: RunContext, source: Any, switches: Switches, verdict: MpsVerdict) -> Checked:
    """The task's shapes and inputs, and the run directory's path (duorl/cli/preflight.py)."""
    cfg = run.cfg
    # unbound: shapes and state names, no simulation (None: a whole VecEnv without a Task, mjlab's)
    task = source.checked_task(cfg.task)  # the one the config checks built (a slow factory runs once)
    spec = source.spec(cfg.task) if task is None else task.spec
    found = preflight(cfg, source, spec, task, run.place.lead)
    for warning in found.warnings:
        print(f"duorl: warning: {warning}", file=sys.stderr, flush=True)
    run.place.agree(found.problem, "checking the run's inputs")
    return Checked(switches, verdict, source, task, spec)


def _memory_problem(run: RunContext, replay_bytes: int) -> str | None:
    """Whether the replay ring, the weight board, the networks and their activations fit on this device
    (runtime/memory.py), the networks counted from the configuration: nothing is allocated. The problem,
    naming the keys to change, when they do not."""
    cfg = run.cfg
    assert run.checked is not None
    actor, critic = network_sizes(cfg.algo, run.checked.spec)
    actor_keys, critic_keys = network_shape_keys(cfg.algo.name)
    larger, keys = ("actor", actor_keys) if actor.state >= critic.state else ("critic", critic_keys)
    shown = " or ".join(f"{k}={format_value(getattr(cfg.algo, k.split('.', 1)[1]))}" for k in keys)
    counts = f"the actor has {actor.params:,} parameters, the critic {critic.params:,}"
    fixes = MemoryFixes(replay="lower algo.buffer_size (ticks kept per env) or training.num_envs",
                        networks=f"shrink the {larger}: lower {shown} ({counts})",
                        activations=f"lower algo.batch_size={cfg.algo.batch_size} or training.num_envs="
                                    f"{cfg.training.num_envs}, or shrink the {larger}: lower {shown}")
    need = MemoryNeed.of(replay_bytes, actor, critic, cfg.algo.batch_size, cfg.training.num_envs,
                         run.place.data_parallel)
    return memory_problem(run.device, need, fixes)


def _load_resume(run: RunContext) -> tuple[Any, Any, dict[str, Any]]:
    """(this rank's runtime state, rank 0's learner state, the manifest's resumed_from): rank 0 reads and
    checks the checkpoint; every rank gets the learner state and its own runtime state (replay can be
    large: no rank receives another's); ranks refuse together."""
    from duorl.cli.resume import load_resume

    cfg, lead, ctx = run.cfg, run.place.lead, run.place.ctx
    assert run.checked is not None
    problem, found = None, None
    if lead:
        try:
            found = load_resume(cfg.training.resume, config_to_dict(cfg), _task_state_keys(run.checked.task),
                                run.place.world, type(cfg.task))
        except ConfigError as e:
            if ctx is None:
                raise
            problem = str(e)
    if ctx is None:
        assert found is not None
        return found[2][0], found[1], _resumed_from(found[0], found[2])
    ctx.agree(problem, "checking the checkpoint to resume")
    head = ctx.broadcast((found[1], _resumed_from(found[0], found[2])) if lead else None,
                         "sharing the checkpoint to resume")
    mine = ctx.scatter_from_zero(list(found[2]) if lead else None, "handing every rank its runtime state")
    learner_state, resumed_from = head
    return mine, learner_state, resumed_from


def _task_state_keys(task: Any) -> tuple[str, ...]:
    """The names of the task's resume state (tasks.base: the optional state_keys()), none if it has none."""
    keys = getattr(task, "state_keys", None)
    return tuple(keys()) if keys is not None else ()


def _resumed_from(ckpt_path: Path, states: list[Any]) -> dict[str, Any]:
    """The manifest's record of a resume (and its one line on the console)."""
    first = states[0]
    note = "" if first.replay is not None else " (replay not in the checkpoint: refilling it first)"
    print(f"duorl: resuming {ckpt_path} at iteration {first.iteration}{note}", flush=True)
    return {
        "checkpoint": str(ckpt_path),
        "iteration": first.iteration,
        "collector_state": all(s.collector is not None for s in states),
        "replay": all(s.replay is not None for s in states),
        "world_size": len(states),
    }


def _stopped_before_start(place: Place) -> bool:
    """A stop that reached any rank before its run directory exists stops them all here."""
    stop_now = early_stop_signal() is not None
    if place.ctx is not None:
        stop_now = any(place.ctx.all_gather(stop_now, "agreeing whether to start", group="startup"))
    if stop_now and place.lead:
        print("duorl: stopped before the run started (nothing was written)", file=sys.stderr, flush=True)
    return stop_now


def _claim_run_dir(run: RunContext) -> None:
    """Rank 0 claims a new run directory (atomic: never an existing one); every rank learns its path (sets
    run.run_dir)."""
    cfg, place, ctx = run.cfg, run.place, run.place.ctx
    run_dir: Path | None = None
    if place.lead:
        run_dir = claim_run_dir(cfg.training.log_dir, default_run_dir(cfg.task.name, cfg.algo.name))
        write_json_atomic(run_dir / "run_config.json", config_to_dict(cfg))
        print(f"duorl: run directory {run_dir}", flush=True)
    if ctx is not None:
        # global rank 0 (whichever host the rendezvous made it) writes the run directory: every other
        # node says where it is (docs/distributed.md)
        path, writer = ctx.broadcast((str(run_dir), ctx.host) if place.lead else None, "sharing the run directory")
        run_dir = Path(path)
        if not place.lead and ctx.env.local_rank == 0:
            print(f"duorl: run directory {run_dir} on {writer} (written by rank 0)", flush=True)
    assert run_dir is not None
    run.run_dir = run_dir


def _build_learner(run: RunContext) -> None:
    """The learner (restored on resume) and its gradient synchronizer (the data-parallel one, or None): sets
    run.learner and run.sync."""
    tr, device, checked = run.cfg.training, run.device, run.checked
    assert checked is not None
    if device.type == "cuda":
        # the learner's CUDA graph captures on the current device's stream and registers its default
        # generator: on any GPU but the first, both must be the run's (the collector sets its own)
        torch.cuda.set_device(device)
    torch.manual_seed(derive_seed(tr.seed, "learner"))
    # the same networks and update noise on every rank: the learner streams are rank 0's everywhere
    learner = run.learner = make_learner(run.cfg.algo, checked.spec, device, derive_seed(tr.seed, "learner"))
    if checked.learner_state is not None:
        learner.load_state_dict(checked.learner_state)
    if run.place.ctx is not None:
        run.sync = _data_parallel_learner(run)
        return
    # alone, the same rule as under data parallel: a step whose loss or gradients are not finite is
    # skipped (on the device), and counted in Train/skipped_updates
    learner.set_synchronizer(LocalValidity(device))


def _data_parallel_learner(run: RunContext) -> Any:
    """Rank 0's initial learner state on every rank, the gradient layout agreed, and the learner's
    groups handed to the all-reduce synchronizer."""
    from duorl.distributed.agreement import layout_mismatch
    from duorl.distributed.collective_wait import CollectiveWatch, RankBeats
    from duorl.distributed.grad_sync import AllReduceSynchronizer, group_layout
    from duorl.runtime.checkpoint import to_cpu

    learner, ctx, tr = run.learner, run.place.ctx, run.cfg.training
    state = ctx.broadcast(to_cpu(learner.state_dict()) if ctx.rank == 0 else None,
                          "broadcasting rank 0's initial learner state")
    if ctx.rank != 0:
        learner.load_state_dict(state)
    layouts = ctx.all_gather(group_layout(learner.sync_groups, tr.dp_gradient_wire_dtype),
                             "comparing gradient layouts", group="startup")
    ctx.agree(layout_mismatch(layouts), "comparing gradient layouts")
    sync = AllReduceSynchronizer(ctx.data, ctx.world_size, run.device, tr.dp_gradient_wire_dtype)
    # the learner beats while it waits for a peer rank, and names the one it waits for
    ctx.watch = sync.watch = CollectiveWatch(ctx.rank, ctx.host, tr.wait_report_s, RankBeats(ctx.env, ctx.host))
    learner.set_synchronizer(sync)
    return sync


def _reporting(run: RunContext) -> None:
    """Rank 0's run directory (None on other ranks), where the duo's results go (the run directory; a
    rank's reporter under data parallel) and the coordinator of the ranks' iteration boundaries: sets
    run.directory, run.reporter and run.coordinator."""
    place, ctx, checked, run_dir = run.place, run.place.ctx, run.checked, run.run_dir
    assert checked is not None and run_dir is not None
    if place.lead:
        (run_dir / "checkpoints").mkdir(exist_ok=True)
        directory = run.directory = RunDirectory(run.cfg, run_dir, run.learner, run.device)
        directory.manifest.update(run_manifest(run))
        # why the tick runs eagerly whatever sim.tick_cuda_graph says (an mjlab step syncs the host)
        directory.manifest["collector_tick_cuda_graph"]["eager_reason"] = checked.source.tick_eager_reason
        # which rule skips invalid steps: this process's verdict alone, or every rank's
        directory.manifest["gradient_synchronizer"] = type(run.learner.grad_sync).__name__
        if run.sync is not None:
            directory.manifest["dp_gradient_groups"] = run.sync.layout()
    if ctx is None:
        run.reporter, run.coordinator = run.directory, Solo()
        return
    from duorl.distributed.dp_coordinator import DataParallelCoordinator, RankReporter

    rank_record = {"rank": place.rank, "local_rank": ctx.env.local_rank, "host": ctx.host,
                   "device": str(run.device), "device_uuid": device_record(run.device).get("uuid")}
    run.reporter = RankReporter(ctx, run.directory, run.sync, rank_record)
    run.coordinator = DataParallelCoordinator(ctx, run.sync.watch)


def run_manifest(run: RunContext) -> dict[str, Any]:
    """The manifest's entries that the checks decided (devices, switches, graphs, the task's shapes, the
    resume, the compile caches); rank 0 writes them into its run directory's manifest."""
    cfg, checked = run.cfg, run.checked
    assert checked is not None
    tr, algo, switches = cfg.training, cfg.algo, checked.switches
    return {
        "world_size": run.place.world,
        "rank": 0,
        "data_parallel": run.place.data_parallel,
        "devices": [device_record(run.device)],
        "env_device": switches.env_device,
        "sim": cfg.sim.name,
        "host": host_record(),
        "versions": package_versions(),
        "switches": switches.record(),
        # "enabled": the resolved setting; "active" (updated after the run): a captured graph ran
        "whole_cycle_cuda_graph": {
            "configured": algo.algo_params.whole_cycle_cuda_graph,
            "dp_configured": algo.algo_params.dp_whole_cycle_cuda_graph,
            "enabled": switches.whole_cycle_cuda_graph,
            "dp_graph": switches.dp_whole_cycle_cuda_graph,
            "active": False,
        },
        # "active" (updated after the run): the collector replayed a captured tick
        "collector_tick_cuda_graph": {
            "configured": cfg.sim.tick_cuda_graph,
            "enabled": switches.tick_cuda_graph,
            "active": False,
            # sim.tick_compile: the step's tensor code compiled into fused kernels
            "compiled": {"configured": cfg.sim.tick_compile, "enabled": switches.tick_compile},
            # sim.solver_early_exit: MuJoCo Warp's solver loop as a conditional node of the tick graph
            "solver_early_exit": {"configured": cfg.sim.solver_early_exit, "enabled": switches.solver_early_exit},
        },
        "max_wall_minutes": tr.max_wall_minutes,
        "dp_gradient_wire_dtype": tr.dp_gradient_wire_dtype,
        "env_spec": checked.spec.record(),
        "resumed_from": checked.resumed_from,
        # where compiled code is kept between runs (docs/guide.md "Compile caches"); learner and collector share them
        "compile_caches": compile_cache_dirs(),
    }


def _build_duo(run: RunContext) -> None:
    """The duo: its settings, the collector's env and actor factories, and the MPS check at its start (sets
    run.snapshot_dir and run.duo)."""
    cfg, checked, place, run_dir = run.cfg, run.checked, run.place, run.run_dir
    assert checked is not None and run_dir is not None
    tr, switches, rank, lead, ctx = cfg.training, checked.switches, place.rank, place.lead, place.ctx
    run.snapshot_dir = run_dir / "checkpoints" if lead else _rank_scratch(rank, ctx.env.run_id)
    env_factory = functools.partial(
        make_vec_env,
        cfg.task,
        cfg.sim,
        tr.num_envs,
        switches.env_device,
        derive_seed(tr.seed, "env", rank),
        tr.nan_guard.enabled,
        cfg.debug.nan_inject_step,
        compile=switches.tick_compile,
        solver_early_exit=switches.solver_early_exit,
    )
    actor_factory = functools.partial(make_actor, cfg.algo, checked.spec)
    settings = DuoSettings(
        config=cfg,
        device=str(run.device),
        explore_seed=derive_seed(tr.seed, "explore", rank),
        replay_seed=derive_seed(tr.seed, "replay", rank),
        whole_cycle_cuda_graph=switches.whole_cycle_cuda_graph,
        tick_cuda_graph=switches.tick_cuda_graph,
        snapshot_dir=str(run.snapshot_dir),
        nan_dump_path=str(run_dir / "nan_first_state.pt") if tr.nan_guard.enabled and lead else None,
        nan_loss_iteration=cfg.debug.nan_loss_iteration if cfg.debug.nan_loss_rank == rank else -1,
        fail_capture=cfg.debug.fail_capture_rank == rank,
        on_learner_stalled=stall_recorder(ctx, run_dir if lead else None),
        on_learner_gone=gone_recorder(run_dir if lead else None),
        snapshot_dir_is_scratch=not lead,
        report_startup=lead,
    )
    if run.directory is not None:
        run.directory.manifest["cuda_process_sharing"] = mps_manifest(tr.cuda_process_sharing,
                                                                      [checked.verdict.evidence])
    run.duo = Duo(settings, checked.spec, run.learner, env_factory, actor_factory, run.reporter,
                  resume=checked.resume_state,
                  on_collector_ready=functools.partial(_check_mps_clients, run.mps, ctx, tr.cuda_process_sharing),
                  coordinator=run.coordinator,
                  on_startup=functools.partial(_write_startup, run_dir) if lead else None,
                  prestarted=run.prestarted)


def _rank_scratch(rank: int, run_id: str) -> Path:
    """Where a rank other than 0 (which may run on a host without the run directory) keeps its
    collector's snapshots until they are gathered into rank 0's checkpoint: named by the run, so that
    whoever outlives the rank (its collector, the launcher) can remove it (distributed/launch.py)."""
    remove_dead_rank_scratch()  # those of runs killed at once on this host (nobody else removes them)
    path = rank_scratch_dir(run_id, rank, os.getppid())
    path.mkdir(parents=True, exist_ok=True)
    return path


def _write_startup(run_dir: Path, record: dict[str, Any]) -> None:
    """The duo's on_startup: both processes' start-up phases into RUN_DIR/startup.json, and the line that
    ends the start-up table on the console."""
    path = run_dir / "startup.json"
    try:
        write_json_atomic(path, record)
    except WriteFailed as e:  # the table is a report: the run goes on (the next write fails it, if the disk is full)
        print(f"duorl: warning: {e}", file=sys.stderr, flush=True)
        return
    done = next((p for p in record["learner"] if p["name"] == "first update"), None)
    what = "first update" if done is not None else "start-up ended without an update"
    end = done["end_s"] if done is not None else max(p["end_s"] for p in record["learner"])
    print(f"duorl: start-up {end:6.1f} s  {what}; every phase of both processes in {path}", flush=True)


def _check_mps_clients(mps: MpsSession, ctx: Any, sharing: Any, collector_pid: int,
                       collector_device: str) -> dict[str, Any]:
    """The duo's on_collector_ready: MPS fails open, so once both processes hold a CUDA context, prove
    they share one GPU as the daemon's clients (on every rank); the manifest's record of it."""
    v = mps.verify(os.getpid(), collector_pid, collector_device)
    verdicts = _gather_verdicts(ctx, v)
    if not all(x.ok for x in verdicts):
        bad = next(x for x in verdicts if not x.ok)
        raise StartRefused(bad.message if ctx is None else f"rank {bad.evidence.rank} ({bad.host}): {bad.message}")
    return {"cuda_process_sharing": mps_manifest(sharing, [x.evidence for x in verdicts], [x.host for x in verdicts])}


def _gather_verdicts(ctx: Any, verdict: MpsVerdict) -> list[MpsVerdict]:
    if ctx is None:
        return [verdict]
    return ctx.all_gather(verdict, "gathering the CUDA MPS client checks", group="startup")


def _finish(run: RunContext, result: Any) -> int:
    """Record the outcome (rank 0), run the post-training steps and return the exit code."""
    if result.status == "refused":
        return _finish_refused(run, result)
    if result.status == "failed":
        return _finish_failed(run, result)
    digests = _final_state_digests(run)
    directory = run.directory
    if directory is None:
        return 0
    extra = _summary_extras(run, result, digests)
    extra.update(_after_training(run))
    env_steps = _total_env_steps(directory, result.env_steps)
    directory.finish(result.status, result.iterations, env_steps, result.wall_s, **extra)
    from duorl.telemetry.metrics_file import NO_EPISODE_YET, RETURN_KEY

    ret = result.last_metrics.get(RETURN_KEY)
    msg = f"duorl: {result.status} {result.iterations} iterations, {env_steps:,} env steps in {result.wall_s:.1f} s"
    msg += f"; mean episode return {ret:.2f}" if ret is not None else f"; {NO_EPISODE_YET}"
    if result.wall_limited:
        msg += f" (stopped by training.max_wall_minutes={run.cfg.training.max_wall_minutes})"
    print(msg, flush=True)
    print(f"duorl: run directory {run.run_dir}", flush=True)
    return 0


def _finish_refused(run: RunContext, result: Any) -> int:
    print(f"error: {result.error}", file=sys.stderr, flush=True)
    if run.directory is not None:
        run.directory.finish("refused", result.iterations, 0, result.wall_s, error=result.error)
    if run.place.ctx is not None:
        record_rank_failure(result.error or "refused", "input")
    return exit_code(result.status)


def _finish_failed(run: RunContext, result: Any) -> int:
    ctx, directory = run.place.ctx, run.directory
    where = f"rank {ctx.rank} ({ctx.host}): " if ctx is not None else ""
    fields: dict[str, Any] = {"error": result.error, "failed_part": result.failed_part}
    lost = ctx is not None and result.failed_part == "peer rank"
    if ctx is not None:
        # a peer rank's loss is only the echo of its failure: the peer's record names the cause (else the
        # launcher replaces it with the cause); the failing rank is named
        cause = name_the_cause(ctx.env, ctx.host, f"{where}{result.error}") if lost else None
        # this node's torchrun reports this rank's error file: the cause, where it is known
        record_rank_failure(cause.message if cause is not None else f"{where}{result.error}",
                            result.failed_part or "learner", secondary=lost)
        fields = summary_fields(ctx.env, f"{where}{result.error}", result.failed_part or "learner", cause)
    if not lost:
        print(f"duorl: error: {where}{result.error}", file=sys.stderr, flush=True)
    if directory is not None:
        directory.finish("failed", result.iterations, _total_env_steps(directory, result.env_steps), result.wall_s,
                         **fields)
    if directory is not None:
        kept = f"last checkpoint checkpoints/{directory.checkpoints[-1]} kept" if directory.checkpoints else "no checkpoint"
        print(f"duorl: run directory {run.run_dir} (status failed; {kept})", file=sys.stderr)
    return exit_code(result.status)


def _total_env_steps(directory: Any, this_rank: int) -> int:
    """The env steps a summary records: every rank's, as last logged or checkpointed (the run directory's
    count), else this process's own count (`this_rank`: nothing logged yet)."""
    return directory.total_env_steps if directory.total_env_steps is not None else this_rank


def _final_state_digests(run: RunContext) -> dict[str, Any] | None:
    """Every rank's learner state, hashed (data parallel keeps them bitwise equal); None alone."""
    ctx, learner = run.place.ctx, run.learner
    if ctx is None:
        return None
    from duorl.distributed.agreement import state_digest

    mine = state_digest(learner.state_dict(), tuple(learner.rank_local_state))
    hashes = ctx.all_gather(mine, "comparing the final learner states", group="startup")
    digests = {"sha256": hashes, "equal": len(set(hashes)) == 1}
    if not digests["equal"] and ctx.rank == 0:
        print(f"duorl: warning: the ranks' final learner states differ: {hashes}", file=sys.stderr, flush=True)
    return digests


def _summary_extras(run: RunContext, result: Any, digests: dict[str, Any] | None) -> dict[str, Any]:
    """The run's manifest updates, and what run_summary.json records beside the status."""
    cfg, directory, run_dir = run.cfg, run.directory, run.run_dir
    assert run_dir is not None
    if result.graph is not None:
        directory.manifest["whole_cycle_cuda_graph"].update(result.graph)
    directory.manifest["collector_tick_cuda_graph"]["active"] = result.tick_graph_active
    extra: dict[str, Any] = {}
    if result.wall_limited:
        extra["stopped_by"] = f"training.max_wall_minutes={cfg.training.max_wall_minutes}"
    if (run_dir / "nan_first_state.pt").exists():
        extra["nan_first_state"] = "nan_first_state.pt"
    if cfg.debug.check_replay_window:
        extra["replay_window_check"] = {
            "samples_checked": result.replay_samples_checked,
            "violations": result.replay_window_violations,
        }
    if run.place.ctx is not None:
        extra["dp_learner_state"] = digests
    return extra


def _after_training(run: RunContext) -> dict[str, Any]:
    """Export and post-train play, as configured; their results go into run_summary.json."""
    tr, run_dir = run.cfg.training, run.run_dir
    assert run_dir is not None and run.checked is not None
    out: dict[str, Any] = {}
    if tr.export_onnx:
        from duorl.cli.export import export_policy

        out["export"] = export_policy(run.learner.actor, run.checked.spec.actor_obs_dim, run_dir / "export")
        print(f"duorl: exported {out['export']['onnx']} and {out['export']['safetensors']}", flush=True)
    if not tr.no_play:
        r = evaluate(run_dir, episodes=8)
        out["play"] = r.__dict__
        print(f"duorl: play: mean return {r.mean_return:.3f} over {r.episodes} episodes (deterministic)", flush=True)
    return out
