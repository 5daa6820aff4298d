"""The collector process: an actor copy and a VecEnv on the duo's device, writing replay.

A prestarted collector (runtime/prestart.py, PrestartedCollector), started before its learner read the
configuration, gets three messages: `Preparation` once the configuration is known good (the environment
the learner set since, what to import ahead), `EnvArgs` once the run's checks passed, from which it builds
its env, its actor and the first observation while the learner is built, then `CollectorArgs` at the duo's
spawn (the shared buffers, the weights, the run's settings), with which it builds its tick and runs. A
plain spawn gets `CollectorArgs` alone and builds it all then.

Collector iteration k runs ticks [k*s, (k+1)*s) with W_k, the weights learner iteration k-1 published
(W_0 = initial weights), then announces the ticks. It never runs ahead of the weights, so the duo's
results do not depend on which process is faster.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn

from duorl.config.errors import InputRefused
from duorl.runtime.control import (
    COLLECTOR_PID,
    FINAL_BOUNDARY,
    COLLECTOR_READY,
    STOP,
    STOP_REQUESTED,
    TICKS_WRITTEN,
    WEIGHTS_VERSION,
    ControlBlock,
    PeerStalled,
    StopRequested,
    format_exception,
    spins_while_waiting,
    wait_until,
)
from duorl.runtime import orphans
from duorl.runtime.heartbeat import Heartbeat, PeerWatch, StallBounds
from duorl.runtime.orphans import set_parent_death_signal
from duorl.runtime.atomic_files import WriteFailed, atomic_write
from duorl.runtime.checkpoint import to_cpu
from duorl.runtime.replay import ReplayLayout, ReplayRing
from duorl.runtime.settings import DuoSettings
from duorl.runtime.tick import CollectorTick
from duorl.runtime.timing import PhaseTimer, sync
from duorl.runtime.weights import WeightBoard
from duorl.startup_phases import PHASES, console_line


@dataclass
class CollectorArgs:
    """Everything the spawned collector needs: the duo's settings (the run's Config and what the rank
    derived from it) and the handles of what the learner allocated. Picklable (factories are
    functools.partial of module-level functions, tensors travel as shared memory / CUDA IPC handles)."""

    settings: DuoSettings
    env_factory: Callable[[], Any]  # () -> VecEnv
    actor_factory: Callable[[torch.device], nn.Module]
    replay: dict[str, torch.Tensor]
    replay_layout: ReplayLayout
    board: WeightBoard  # its slots travel as a CUDA IPC handle or shared memory, its events as IPC handles
    control: ControlBlock
    start_iteration: int
    learner_pid: int
    # exact resume: the snapshot to start from (None = a fresh env)
    restore: dict[str, Any] | None = None
    # liveness: how long the learner may go without a heartbeat (settings.stall with this duo's
    # peer factor; runtime/heartbeat.py)
    stall: StallBounds = field(default_factory=StallBounds)
    # the learner's own parent (a launcher, a torchrun agent, a shell): named when it is gone too
    supervisor_pid: int = 0
    # when the learner's process started (time.time()): the start-up lines count from there
    startup_origin: float = 0.0


@dataclass
class Preparation:
    """A prestarted collector's first message, once the learner's configuration is known good: what the
    learner changed in its environment since it started this process (the compile caches, CUDA MPS's pipe
    directory, a rank's visible devices; None: removed), applied before anything here reads it, and what to
    import ahead ("module" or "module:function", the function called without arguments)."""

    environ: dict[str, str | None]
    preimports: tuple[str, ...]


@dataclass
class EnvArgs:
    """What a prestarted collector builds its env, its actor and its first observation from, sent once the
    run's checks passed and its directory is claimed, before the learner is built (runtime/duo.py,
    PrestartedCollector.build): the configuration's factories, the device and the control block it reports
    its phase and a failure through. Nothing of the learner: its weights come later, through the board."""

    env_factory: Callable[[], Any]  # () -> VecEnv
    actor_factory: Callable[[torch.device], nn.Module]
    device: str
    torch_threads: int  # training.torch_threads (0: torch's default)
    control: ControlBlock
    fail_env_build: bool = False  # debug.fail_env_build


@dataclass
class _Built:
    """What a prestarted collector built from its EnvArgs before the learner handed it the rest."""

    device: torch.device
    env: Any
    actor: nn.Module
    obs: dict[str, torch.Tensor]


def collector_entry(conn: Any) -> None:
    """Entry point of a collector started before its learner read its configuration (runtime/prestart.py,
    PrestartedCollector): this process imported torch and the runtime meanwhile; given its Preparation, it
    takes on the learner's environment and imports what its env will need while the learner checks its
    inputs; given its EnvArgs (the checks passed), it builds its env, actor and first observation while the
    learner builds itself; then it runs collector_main with the CollectorArgs the learner sends at its spawn.
    A learner that sends nothing (its run was refused) closes the pipe or kills this process: nothing was
    built here."""
    PHASES.add("imports", PHASES.origin)
    _count_compiles()
    with PHASES.phase("waiting for the config"):
        first = _receive(conn)
    if isinstance(first, Preparation):
        _take_environment(first.environ)
        with PHASES.phase("imports ahead"):
            _import_ahead(first.preimports)
        with PHASES.phase("waiting for the checks"):
            first = _receive(conn)
    built = None
    if isinstance(first, EnvArgs):
        built = _build_ahead(first)
        with PHASES.phase("waiting for the learner"):
            first = _receive(conn)
    conn.close()
    collector_main(first, built)


def _take_environment(environ: dict[str, str | None]) -> None:
    """The learner's environment changes since this process started: nothing read them yet (torch's
    import reads none of them; CUDA, Dynamo and Warp start later)."""
    for key, value in environ.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def _import_ahead(preimports: tuple[str, ...]) -> None:
    for entry in preimports:
        module, _, function = entry.partition(":")
        try:
            imported = importlib.import_module(module)
            if function:
                getattr(imported, function)()
        except Exception:  # noqa: BLE001 - the env build imports it again and reports the error there
            pass


def _receive(conn: Any) -> Any:
    """The learner's next message; a learner that ended before its run started ends this process."""
    try:
        return conn.recv()
    except (EOFError, OSError):
        _leave(0)


def _build_ahead(env_args: EnvArgs) -> _Built:
    """The device, the env, the actor and the first observation, beside the learner's build. Signals stay
    ignored here (the learner owns the stop: a run stopped meanwhile hands this process the rest and then
    stops it, or cancels it) and the learner's death kills it (runtime/orphans.py). A failure is recorded as
    collector_main records one, and ends this process: the learner names it when it hands it the rest."""
    control = env_args.control
    control.set(COLLECTOR_PID, os.getpid())  # it began building: the duo hands it the rest, dead or alive
    beat = Heartbeat(control, "collector")
    try:
        with PHASES.phase("device"):
            device = _open_device(env_args.device, env_args.torch_threads)
        beat.phase("building env")
        with PHASES.phase("env"):
            env = _make_env(env_args.env_factory, env_args.fail_env_build)
        with PHASES.phase("actor and reset"):
            actor, obs = _actor_and_reset(env_args.actor_factory, env, device, control)
    except (WriteFailed, InputRefused) as e:  # said in words, as collector_main says them
        _record_failure(control, e)
        _leave(1)
    except BaseException:  # noqa: BLE001 - everything goes to the learner, then we exit non-zero
        _record_failure(control, None)
        _leave(1)
    return _Built(device, env, actor, obs)


def collector_main(args: CollectorArgs, built: _Built | None = None) -> None:
    """Entry point of the spawned process (`built`: what a prestarted one built from its EnvArgs). It has
    been dying with its learner since its first import of duorl (runtime/orphans.py: SIGKILL until here);
    from here the learner's death is a SIGTERM this handler turns into a recorded failure."""
    if PHASES.last("imports") is None:  # from the process's start: the interpreter and unpickling the args
        PHASES.add("imports", PHASES.origin)
        _count_compiles()
    control = args.control
    # Ctrl-C reaches the whole process group; the learner owns shutdown and tells us through STOP.
    # A SIGTERM (e.g. torch's launcher stopping the rank's process group) asks the learner for the
    # same clean stop instead of killing the collector under it, unless the learner is gone.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda signum, frame: _on_sigterm(args))
    set_parent_death_signal(signal.SIGTERM)
    if orphans.early_sigterm:
        _on_sigterm(args)
    if os.getppid() != args.learner_pid:  # gone between the first arming and this one
        _learner_gone(args)
    control.set(COLLECTOR_PID, os.getpid())
    code = 0
    try:
        _run(args, built)
    except StopRequested:
        pass
    except PeerStalled as e:
        _end_stalled_learner(args, str(e))
    except (WriteFailed, InputRefused) as e:  # a full disk, an env that refuses to be built as asked (a stale
        # spec cache, a step it cannot take): the cause in words is the whole story
        _record_failure(control, e)
        code = 1
    except BaseException:  # noqa: BLE001 - everything goes to the learner, then we exit non-zero
        _record_failure(control, None)
        code = 1
    if code == 0:
        control.set_phase("stopped")
    _leave(code)


def _record_failure(control: ControlBlock, in_words: WriteFailed | InputRefused | None) -> None:
    """Hand the learner this process's failure (the one being handled) and say it on stderr: a full disk
    or a refusal (`in_words`) in words, anything else with its traceback. Its start-up phases go first, so that
    startup.json shows where a start failed."""
    if PHASES.last("first iteration") is None:
        control.write_startup(json.dumps(PHASES.record()))
    if in_words is not None:
        control.write_error(f"collector (pid {os.getpid()}) failed in phase '{control.phase()}': {in_words}")
        sys.stderr.write(f"duorl: error: {control.read_error()}\n")
    else:
        control.write_error(f"collector failed in phase '{control.phase()}':\n{format_exception()}")
        sys.stderr.write(control.read_error() + "\n")


def _count_compiles() -> None:
    """Each start-up phase says how much of it torch.compile took."""
    from duorl.gpu.torch_internals import compile_seconds

    PHASES.add_counter("torch.compile", compile_seconds)


def _leave(code: int) -> None:
    """Exit at once: everything the collector wrote is closed, and the interpreter's teardown (a second
    or more of torch's) would only keep the learner's join, and so the run's end, waiting."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _on_sigterm(args: CollectorArgs) -> None:
    if os.getppid() != args.learner_pid:
        _learner_gone(args)  # the parent-death signal: the learner died
    args.control.set(STOP_REQUESTED, 1)


def _learner_gone(args: CollectorArgs) -> None:
    """The learner died without a word (SIGKILL, the out-of-memory killer, a crash in native code): it
    can no longer end the run, so this collector records why the run ended and leaves at once."""
    supervisor = args.supervisor_pid
    if supervisor > 1 and not _pid_alive(supervisor):
        why = f"its parent (pid {supervisor}, the launcher or the shell) is gone too: the run was killed from outside"
    else:
        why = "killed by a signal (SIGKILL, the out-of-memory killer) or a crash in native code"
    message = (f"the learner (pid {args.learner_pid}) died without a word ({why}); its collector (pid {os.getpid()}) "
               f"was in phase '{args.control.phase()}' and ends too")
    os.write(2, f"duorl: error: {message}\n".encode())
    if args.settings.on_learner_gone is not None:
        try:
            args.settings.on_learner_gone(message)
        except Exception:  # noqa: BLE001 - the message is on stderr already
            pass
    if args.settings.snapshot_dir_is_scratch and args.settings.snapshot_dir is not None:
        import shutil

        shutil.rmtree(args.settings.snapshot_dir, ignore_errors=True)
    _leave(1)


def _pid_alive(pid: int) -> bool:
    """Running (a zombie, dead but not yet reaped by its parent, counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def _end_stalled_learner(args: CollectorArgs, why: str) -> None:
    """The learner is alive but frozen (its heartbeat stopped): it cannot end the run itself, so this
    collector names it and ends it (SIGKILL: a stopped or blocked process handles no other signal),
    then exits; nothing of the duo outlives the run."""
    message = f"{why}; the collector (pid {os.getpid()}) ends the learner"
    sys.stderr.write(f"duorl: error: {message}\n")
    sys.stderr.flush()
    if args.settings.on_learner_stalled is not None:
        try:
            args.settings.on_learner_stalled(message)
        except Exception:  # noqa: BLE001 - the message is on stderr already
            pass
    try:
        os.kill(args.learner_pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    _leave(1)


def _learner_alive(pid: int) -> Callable[[], str | None]:
    def check() -> str | None:
        if os.getppid() != pid:
            return f"learner (pid {pid}) exited"
        return None

    return check


@dataclass
class _Parts:
    """What a collector builds once and steps every iteration."""

    env: Any
    actor: nn.Module
    board: WeightBoard
    gen: torch.Generator
    timer: PhaseTimer
    tick: CollectorTick
    snapshots: "_Snapshots"
    nan_snapshot: Any  # the env's first-NaN snapshot until the collector has read it, else None
    # once read: what the first broken env had, in every later iteration's stats (nan_first_*)
    nan_first: dict[str, float] = field(default_factory=dict)


def _run(args: CollectorArgs, built: _Built | None) -> None:
    """Open the device, build the env and the tick (or only the tick, around what was `built` ahead), say
    ready, then run iterations until told to stop."""
    if built is None:
        with PHASES.phase("device"):
            device = _open_device(args.settings.device, args.settings.config.training.torch_threads)
    else:
        device = built.device
    beat = Heartbeat(args.control, "collector", args.stall)
    watch = PeerWatch(args.control, beat, args.learner_pid, args.stall)
    parts = _build(args, device, beat, built)
    _say_startup(args, "collector's env built", ("imports", "waiting for the config", "imports ahead",
                                                 "waiting for the checks", "device", "env", "actor and reset",
                                                 "waiting for the learner", "views and tick"))
    args.control.set(COLLECTOR_READY, 1)
    try:
        _loop(args, parts, device, beat, watch)
    finally:
        parts.tick.release()  # the graph goes before the env and tensors it references


def _open_device(device_name: str, torch_threads: int) -> torch.device:
    if torch_threads > 0:
        torch.set_num_threads(torch_threads)
    device = torch.device(device_name)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    return device


def _make_env(env_factory: Callable[[], Any], fail: bool) -> Any:
    if fail:
        raise RuntimeError("a failure injected for a test (debug.fail_env_build)")
    return env_factory()


def _actor_and_reset(actor_factory: Callable[[torch.device], nn.Module], env: Any, device: torch.device,
                     control: ControlBlock) -> tuple[nn.Module, dict[str, torch.Tensor]]:
    """The actor (its weights come from the board each iteration) and the env's first observation; the
    device this process opened goes to the learner (its MPS check)."""
    actor = actor_factory(device)
    actor.eval()
    control.write_device(_opened_device(device))
    return actor, _to(env.reset(), device)


def _build(args: CollectorArgs, device: torch.device, beat: Heartbeat, built: _Built | None) -> _Parts:
    """The env (restored on resume), the actor, the views of replay and the weight board, and the tick; a
    prestarted collector built the first two ahead (`built`) and builds the rest, in the same phase, now."""
    beat.phase("building env")
    if built is None:
        with PHASES.phase("env"):
            env = _make_env(args.env_factory, args.settings.config.debug.fail_env_build)
        with PHASES.phase("actor and reset"):
            actor, obs = _actor_and_reset(args.actor_factory, env, device, args.control)
    else:
        env, actor, obs = built.env, built.actor, built.obs
    with PHASES.phase("views and tick"):
        return _build_around(args, device, beat, env, actor, obs)


def _build_around(args: CollectorArgs, device: torch.device, beat: Heartbeat, env: Any, actor: nn.Module,
                  obs: dict[str, torch.Tensor]) -> _Parts:
    """What the collector builds around its env and actor: the views of replay and the weight board, the
    exploration generator, the state restored on resume, and the tick."""
    settings = args.settings
    ring = ReplayRing(args.replay, args.replay_layout)
    board = args.board
    gen = torch.Generator(device=device)
    gen.manual_seed(settings.explore_seed)
    timer = PhaseTimer(device)
    if args.restore is not None:
        obs = _restore(args.restore, env, actor, gen, device)
    tick = CollectorTick(env, actor, ring, gen, obs, device, cuda_graph=settings.tick_cuda_graph, timer=timer,
                         eval_envs=settings.config.training.eval_envs)
    snapshots = _Snapshots(settings.snapshot_dir, beat)
    nan_snapshot = env.nan_snapshot
    return _Parts(env, actor, board, gen, timer, tick, snapshots, nan_snapshot)


def _loop(args: CollectorArgs, parts: _Parts, device: torch.device, beat: Heartbeat, watch: PeerWatch) -> None:
    """Iteration k waits for W_k, writes ticks k*s..(k+1)*s-1 into replay and publishes them."""
    control, settings = args.control, args.settings
    learner_alive = _learner_alive(args.learner_pid)
    stop = lambda: control.get(STOP) == 1  # noqa: E731
    s = settings.env_steps_per_sync
    spin = spins_while_waiting(device)
    k = args.start_iteration
    while True:
        try:
            waited = wait_until(lambda: control.get(WEIGHTS_VERSION) >= k, learner_alive,
                                f"the collector waited for weights W_{k}", stop, watch=watch, spin=spin)
        except StopRequested:
            waited = 0.0
        if stop():
            parts.snapshots.persist(control.get(FINAL_BOUNDARY))
            return
        if k == args.start_iteration:
            with PHASES.phase("first iteration"):
                stats = _iteration(args, parts, device, beat, k, waited)
            _report_startup(args)
        else:
            stats = _iteration(args, parts, device, beat, k, waited)
        # the state after iteration k is the start of iteration k+1: keep it for a checkpoint there
        parts.snapshots.take(k, parts.env, parts.actor, parts.gen, parts.tick.obs)
        if settings.config.algo.save_interval > 0 and (k + 1) % settings.config.algo.save_interval == 0:
            parts.snapshots.persist(k + 1)
        control.write_stats(k, stats)
        control.set(TICKS_WRITTEN, (k + 1) * s)
        k += 1


def _iteration(args: CollectorArgs, parts: _Parts, device: torch.device, beat: Heartbeat, k: int,
               waited: float) -> dict[str, float]:
    """Step iteration k's ticks with W_k; its stats."""
    settings, tick = args.settings, parts.tick
    t_iter = time.perf_counter()
    parts.board.load_into(parts.actor, k)
    # the first tick compiles (sim.tick_compile) or is captured (sim.tick_cuda_graph): a long phase
    beat.phase("stepping" if k > args.start_iteration else "compiling or capturing")
    tick.run(k * settings.env_steps_per_sync, settings.env_steps_per_sync)
    if settings.config.debug.collector_delay_ms > 0:
        time.sleep(settings.config.debug.collector_delay_ms / 1e3)
    # the publish: rows must be in memory before the learner may read them
    sync(device)
    stats = parts.timer.collect()
    if parts.nan_snapshot is not None and bool(parts.nan_snapshot.taken):  # after the sync: no extra stall
        parts.nan_first = _first_non_finite(parts.nan_snapshot.facts(), args.start_iteration * settings.env_steps_per_sync)
        if settings.nan_dump_path:
            torch.save({"iteration": k, **parts.nan_snapshot.tensors()}, settings.nan_dump_path)
        parts.nan_snapshot = None
    stats.update(parts.nan_first)
    stats["collector_learner_wait_ms"] = waited * 1e3
    stats["collector_iteration_ms"] = (time.perf_counter() - t_iter) * 1e3
    stats["collector_tick_graph"] = 1.0 if tick.captured else 0.0
    stats.update(tick.sums.result())
    return stats


def _first_non_finite(facts: dict[str, Any], first_tick: int) -> dict[str, float]:
    """The NaN guard's first broken env as stats (control.py nan_first_*): its step counted in the run's
    ticks (1-based; the env counts from its build, at tick `first_tick` of a resumed run)."""
    return {"nan_first_mask": float(facts["mask"]), "nan_first_step": float(first_tick + facts["step"]),
            "nan_first_episode_step": float(facts["episode_step"]), "nan_first_env": float(facts["env_index"])}


def _report_startup(args: CollectorArgs) -> None:
    """The collector's start-up is over (its first iteration's ticks are in replay, not yet announced):
    hand its phases to the learner (startup.json) and say how the first iteration went."""
    args.control.write_startup(json.dumps(PHASES.record()))
    _say_startup(args, "collector's first iteration done", ("warp modules preloaded", "first tick", "tick capture"))


def _say_startup(args: CollectorArgs, what: str, names: tuple[str, ...]) -> None:
    if not args.settings.report_startup:
        return
    phases = [p for p in (PHASES.last(n) for n in names) if p is not None]
    print(console_line(what, phases, args.startup_origin or PHASES.origin), flush=True)


def _opened_device(device: torch.device) -> str:
    """The device this process actually opened: its GPU's UUID (what a same-GPU check can compare
    across processes, whatever ordinal each sees), else "cpu"."""
    from duorl.config.devices import gpu_uuid

    return gpu_uuid(device) or (str(device) if device.type == "cuda" else "cpu")


def snapshot_path(directory: str | os.PathLike, boundary: int) -> str:
    """Where the collector leaves its state at an iteration boundary for the learner's checkpoint."""
    return os.path.join(directory, f".collector_{boundary:06d}.pt")


def remove_snapshots(directory: str | os.PathLike) -> None:
    """Remove the states a collector left for checkpoints that were never taken (it runs one
    iteration ahead, so a stop can leave the one of the boundary after the final checkpoint's)."""
    for path in Path(directory).glob(".collector_*.pt"):
        path.unlink(missing_ok=True)


class _Snapshots:
    """The collector's state after each of its last two iterations (env, exploration RNG, the obs the
    next tick acts on). Two, because when a run stops the collector may already have finished the
    iteration after the learner's last one."""

    def __init__(self, directory: str | None, beat: Heartbeat | None = None) -> None:
        self.directory = directory
        self.slots: list[dict[str, Any] | None] = [None, None]
        self.beat = beat

    def take(self, iteration: int, env: Any, actor: nn.Module, gen: torch.Generator, obs: dict[str, torch.Tensor]) -> None:
        if self.directory is None:
            return
        env_state = env.state_dict()
        if env_state is None:
            return
        snap: dict[str, Any] = {
            "iteration": iteration,
            "env": env_state,
            "obs": {key: v.clone() for key, v in obs.items()},
            "explore_generator": gen.get_state(),
        }
        exploration = actor.exploration_state()
        if exploration is not None:
            snap["actor_exploration"] = exploration
        self.slots[iteration % 2] = snap

    def persist(self, boundary: int) -> None:
        """Write the state at `boundary` (after iteration boundary-1), if this collector has it."""
        if self.directory is None or boundary <= 0:
            return
        snap = self.slots[(boundary - 1) % 2]
        if snap is None or snap["iteration"] != boundary - 1:
            return
        if self.beat is not None:
            self.beat.phase("writing its state")
        state = to_cpu(snap)
        atomic_write(snapshot_path(self.directory, boundary), lambda f: torch.save(state, f), "the collector's state")


def _restore(snap: dict[str, Any], env: Any, actor: nn.Module, gen: torch.Generator, device: torch.device) -> dict[str, torch.Tensor]:
    env.load_state_dict(_to_device(snap["env"], env.device))
    gen.set_state(snap["explore_generator"])
    if "actor_exploration" in snap:
        actor.load_exploration_state(_to_device(snap["actor_exploration"], device))
    return _to(snap["obs"], device)


def _to_device(obj: Any, device: torch.device) -> Any:
    if isinstance(obj, torch.Tensor):
        # generator states are CPU byte tensors and must stay on the CPU
        return obj if obj.dtype == torch.uint8 else obj.to(device)
    if isinstance(obj, dict):
        return {k: _to_device(v, device) for k, v in obj.items()}
    return obj


def _to(obs: dict[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    return {key: v.to(device) for key, v in obs.items()}
