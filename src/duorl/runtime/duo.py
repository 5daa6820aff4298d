"""One duo: the learner loop in this process and a spawned collector process (docs/design.md §3).

Learner iteration k: wait until every tick < k*s is in replay, train `updates_per_step` updates on
ticks the collector cannot be writing, publish W_{k+1}. Collector iteration k runs with W_k. The policy
lag is exactly one iteration and results do not depend on process timing.
"""

from __future__ import annotations

import json
import os
import signal
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Protocol

import torch
import torch.multiprocessing as mp
from torch import nn

from duorl.envs.base import EnvSpec
from duorl.runtime.collector import CollectorArgs, collector_main, remove_snapshots
from duorl.runtime.coordination import RankCoordinator, Solo
from duorl.runtime.heartbeat import Heartbeat, PeerWatch
from duorl.runtime.liveness import PhasedCoordinator, PhasedReporter, shutdown_collector
from duorl.runtime import orphans
from duorl.runtime.stop_signals import STOP_REQUEST
from duorl.runtime.control import (
    COLLECTOR_FAILED,
    COLLECTOR_READY,
    FINAL_BOUNDARY,
    INTERRUPTIBLE_PHASES,
    STOP,
    STOP_REQUESTED,
    TICKS_WRITTEN,
    WEIGHTS_VERSION,
    ControlBlock,
    PeerDied,
    PhaseInterrupted,
    spins_while_waiting,
    wait_until,
)
from duorl.runtime.atomic_files import WriteFailed
from duorl.runtime.deferred_rows import DeferredRows, Row
from duorl.runtime.iteration_metrics import IterationMetrics
from duorl.runtime.outcome import LOOP_ENDINGS, StartRefused, outcome_of  # noqa: F401 - StartRefused: re-exported
from duorl.runtime.replay import ReplayLayout, ReplayRing, ReplaySampler, readable_window
from duorl.runtime.settings import DuoSettings
from duorl.runtime.prestart import PrestartedCollector
from duorl.runtime.task_finiteness import FinitenessCheck
from duorl.runtime.timing import PhaseTimer, sync
from duorl.runtime.weights import WeightBoard, publish_mode
from duorl.startup_phases import PHASES, console_line, merged_record

POLICY_LAG_ITERATIONS = 1
# what the learner's wait for its collector's env is called in the error that ends it
ENV_WAIT = "the learner waited for the collector to build its env"


@dataclass
class ResumeState:
    """What a checkpoint gives the runtime back (the learner's own state is restored by its owner)."""

    iteration: int  # the iteration boundary the checkpoint was taken at
    replay_generator: torch.Tensor
    collector: dict[str, Any] | None  # the collector's state at that boundary (None: fresh envs)
    replay: dict[str, torch.Tensor] | None  # the ring's tensors (None: refill replay after resume)
    replay_origin: int = 0  # the first tick the saved ring holds (an earlier resume without replay)


class Reporter(Protocol):
    """Where the loop's results go (the run directory); the runtime knows no file layout."""

    def started(self, manifest: dict[str, Any]) -> None: ...

    def log(self, iteration: int, env_steps: int, wall_s: float, metrics: dict[str, float]) -> None: ...

    def checkpoint(self, iteration: int, env_steps: int, final: bool, runtime_state: dict[str, Any]) -> None:
        """runtime_state: replay_generator, collector (snapshot or None), replay (tensors or None),
        replay_bytes."""


@dataclass
class DuoResult:
    status: str  # completed | interrupted | failed | refused
    iterations: int  # learner iterations finished
    env_steps: int
    wall_s: float
    error: str | None = None
    last_metrics: dict[str, float] = field(default_factory=dict)
    replay_window_violations: int = 0
    replay_samples_checked: int = 0
    graph: dict[str, Any] | None = None  # WholeCycleGraph.state() when the graph was enabled
    tick_graph_active: bool = False  # the collector reported a captured tick
    wall_limited: bool = False  # stopped early by max_wall_s
    failed_part: str | None = None  # what failed: "collector" or "peer rank"


@dataclass
class _Ending:
    """How the loop ended, before the final checkpoint (which may still fail the run)."""

    status: str = "completed"
    error: str | None = None
    failed_part: str | None = None
    keep_last_checkpoint: bool = False
    last_metrics: dict[str, float] = field(default_factory=dict)


class Duo:
    def __init__(
        self,
        settings: DuoSettings,
        spec: EnvSpec,
        learner: Any,
        env_factory: Callable[[], Any],
        actor_factory: Callable[[torch.device], nn.Module],
        reporter: Reporter,
        resume: ResumeState | None = None,
        on_collector_ready: Callable[[int, str], dict[str, Any]] | None = None,
        coordinator: RankCoordinator | None = None,
        on_startup: Callable[[dict[str, Any]], None] | None = None,
        prestarted: PrestartedCollector | None = None,
    ) -> None:
        s = settings
        if s.buffer_size < 2 * s.env_steps_per_sync:
            raise ValueError(
                f"algo.buffer_size={s.buffer_size} must be >= 2 * training.env_steps_per_sync="
                f"{2 * s.env_steps_per_sync}: the ring holds the ticks being written plus a readable window"
            )
        self.s = settings
        self.spec = spec
        self.learner = learner
        self.env_factory = env_factory
        self.actor_factory = actor_factory
        self.reporter = reporter
        self.resume = resume
        # called once both processes hold their device context, with the collector's pid and the device
        # it opened (MPS evidence); returns manifest entries or raises StartRefused
        self.on_collector_ready = on_collector_ready
        self.coord: RankCoordinator = coordinator if coordinator is not None else Solo()
        # called once with both processes' start-up phases (startup_phases.merged_record), at the first
        # update or, for a run that never updates, at its end
        self.on_startup = on_startup
        self._startup_reported = False
        # a collector process started earlier, waiting for its arguments (None: spawned when needed)
        self.prestarted = prestarted
        self.device = torch.device(settings.device)
        self._spin = spins_while_waiting(self.device)
        self.process: mp.Process | None = None
        self._watch: PeerWatch | None = None
        self._done_iterations = 0
        self.tick_graph_active = False
        self.wall_limited = False  # stopped by max_wall_s (a completed run, at an earlier boundary)
        # built by _allocate (run's first step); None until then, so that _shutdown knows what exists
        self.layout: ReplayLayout = None  # type: ignore[assignment]
        self.ring: ReplayRing = None  # type: ignore[assignment]
        self.board: WeightBoard = None  # type: ignore[assignment]
        self._rows: DeferredRows | None = None  # event publish: rows read one row late
        self.control: ControlBlock | None = None
        self._beat: Heartbeat = None  # type: ignore[assignment]
        self.sampler: ReplaySampler = None  # type: ignore[assignment]
        self.loss_poison: torch.Tensor | None = None
        self.graph: Any = None  # a WholeCycleGraph when whole_cycle_cuda_graph
        self._cycles_seen: set[Any] = set()
        self.replay_origin = 0  # the first tick replay holds (set by _restore)
        self._wait_stop: Callable[[], bool] = lambda: False

    # -- setup ---------------------------------------------------------------------------------
    def _allocate(self) -> None:
        with PHASES.phase("buffers"):
            self._allocate_buffers()

    def _allocate_buffers(self) -> None:
        s, spec = self.s, self.spec
        self.layout = ReplayLayout(s.num_envs, s.buffer_size, spec.actor_obs_dim, spec.critic_obs_dim, spec.action_dim)
        self.ring = ReplayRing.allocate(self.layout, self.device, packed=s.config.algo.algo_params.packed_replay)
        self.board = WeightBoard.allocate(self.learner.actor, self.device, publish_mode(self.device))
        if not self.board.publisher_syncs:
            self._rows = DeferredRows()
        # a prestarted collector has been reporting through its block since its env build began
        early = self.prestarted.control if self.prestarted is not None else None
        self.control = early if early is not None else ControlBlock.allocate()
        self._beat = Heartbeat(self.control, "learner", s.stall)
        self.coord.attach_heartbeat(self._beat)
        # the learner's phase follows its calls into the other ranks and into the run directory
        self.coord = PhasedCoordinator(self.coord, self._beat)
        self.reporter = PhasedReporter(self.reporter, self._beat)
        gen = torch.Generator(device=self.device)
        gen.manual_seed(s.replay_seed)
        self.sampler = ReplaySampler(self.ring, gen, check_window=s.config.debug.check_replay_window,
                                     age_bias=s.replay_age_bias)
        # before any capture: a captured graph reads the offsets from this buffer
        self.loss_poison = self.learner.poison_losses(s.updates_per_step) if s.nan_loss_iteration >= 0 else None
        if s.whole_cycle_cuda_graph:
            from duorl.gpu.graphs import WholeCycleGraph

            # the sampler draws inside the captured iteration: its generator replays with the graph
            self.graph = WholeCycleGraph(self.learner, extra_generators=[gen], agree=self.coord.agree_capture,
                                         inject_capture_failure=s.fail_capture)

    def _spawn_collector(self, start_iteration: int) -> None:
        s = self.s
        args = CollectorArgs(
            settings=s,
            env_factory=self.env_factory,
            actor_factory=self.actor_factory,
            replay=self.ring.t,
            replay_layout=self.layout,
            board=self.board,
            control=self.control,
            start_iteration=start_iteration,
            restore=self.resume.collector if self.resume is not None else None,
            learner_pid=os.getpid(),
            # a data-parallel learner on CUDA waits for the other ranks inside its update (NCCL, queued on a
            # stream: the host blocks without beating), so its collector allows it more; a gloo rank's waits
            # are watched and beat (distributed/collective_wait.py): a frozen one is found within the bound
            stall=replace(s.stall, peer_factor=2.0 if self.coord.world_size > 1 and self.device.type == "cuda" else 1.0),
            supervisor_pid=os.getppid(),
            startup_origin=PHASES.origin,
        )
        pre = self.prestarted
        if pre is not None and pre.env is not None and (pre.env.env_factory is not self.env_factory
                                                        or pre.env.actor_factory is not self.actor_factory):
            raise ValueError("the prestarted collector was sent other env and actor factories than its duo's")
        if pre is not None and (pre.process.is_alive() or pre.began_building()):
            self.process = pre.hand(args)
        else:
            if self.prestarted is not None:  # it died importing: a plain spawn shows why, where it fails
                self.prestarted.cancel()
            ctx = mp.get_context("spawn")
            # daemon: multiprocessing terminates it if this process exits on an unhandled path
            self.process = ctx.Process(target=collector_main, args=(args,), name="duorl-collector", daemon=True)
            # the collector dies with this process from its first import of duorl (runtime/orphans.py), and
            # holds SIGINT and SIGTERM from its first instruction until its handlers exist: a launcher's
            # Ctrl-C or SIGTERM to the rank's process group must not kill it while it starts (its learner,
            # signalled too, stops the run cleanly); a blocked mask survives the exec, and this process's
            # own handlers still run meanwhile
            with orphans.starting_collector():
                self.process.start()
        self._watch = PeerWatch(self.control, self._beat, self.process.pid, s.stall)

    def _collector_alive(self) -> str | None:
        p = self.process
        assert p is not None
        if self.prestarted is not None and self.prestarted.send_error is not None:
            return f"collector (pid {p.pid}) was never reached: {self.prestarted.send_error}"
        if self.control.get(COLLECTOR_FAILED):
            return f"collector (pid {p.pid}) failed: {self.control.read_error().strip()}"
        if not p.is_alive():
            p.join(timeout=0.1)
            code = p.exitcode
            how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited with code {code}"
            return f"collector (pid {p.pid}) {how} in phase '{self.control.phase()}'"
        return None

    @property
    def done_iterations(self) -> int:
        """The iterations this run has completed (counted from the resumed one): what the run directory
        records when the duo fails outside its loop's own reporting."""
        return self._done_iterations

    # -- the loop ------------------------------------------------------------------------------
    def run(self) -> DuoResult:
        """Build, spawn the collector, loop, then stop it and write the final checkpoint."""
        t_start = time.perf_counter()
        self._allocate()
        start = self._restore()
        self._done_iterations = start
        try:
            ending = self._start_and_loop(start, t_start)
            k = self._done_iterations
            self._report_startup()  # a run that never updated (a warm-up, an early stop) reports at its end
            self._shutdown(final_boundary=k)
            if ending.status == "completed" and self._stop_requested():
                ending.status = "interrupted"
            self._final_checkpoint(ending, start, k)
        except KeyboardInterrupt:
            # a second Ctrl-C while the first one's stop is finishing (its ending recorded, the collector
            # stopping, the final checkpoint): at once, no final checkpoint (the periodic ones are intact);
            # the collector goes now instead of outliving this process and reporting its learner dead
            self._end_collector_now()
            raise
        finally:
            if self.s.snapshot_dir is not None:
                remove_snapshots(self.s.snapshot_dir)  # states the collector left for boundaries never reached
        return self._result(ending, k, t_start)

    def _end_collector_now(self) -> None:
        p = self.process
        if p is not None and p.is_alive():
            p.kill()
            p.join(timeout=5)

    def _stop_requested(self) -> bool:
        """A stop asked for here (a signal) or elsewhere (the collector got a SIGTERM)."""
        return STOP_REQUEST() or self.control.get(STOP_REQUESTED) == 1

    def _start_and_loop(self, start: int, t_start: float) -> _Ending:
        """Start the collector and run the loop while signals are listened to; how it ended."""
        ending = _Ending()
        # with peers, a second Ctrl-C is the launcher passing the first one on, not a user's "now"
        # alone, a signal abandons a compile or capture (minutes on a loaded machine) instead of waiting
        # for its end; with peers every rank stops at the same boundary (the stop agreement)
        in_long_phase = (lambda: self._beat.current if self._beat.current in INTERRUPTIBLE_PHASES else None) \
            if self.coord.local_stops else (lambda: None)
        with STOP_REQUEST.listen(escalate=self.coord.local_stops), STOP_REQUEST.phases(in_long_phase):
            self._wait_stop = self._stop_requested if self.coord.local_stops else (lambda: False)
            try:
                self._start_collector(start)
                ending.last_metrics = self._loop(start, self._stop_requested, t_start)
            except LOOP_ENDINGS as e:
                self._record_ending(ending, e)
            except BaseException:
                self._shutdown()
                raise
        return ending

    def _start_collector(self, start: int) -> None:
        """Publish W_start, spawn the collector (or hand the prestarted one the rest), capture the learner's
        first update cycle while the collector builds its tick, wait for it, and report the run started."""
        with PHASES.phase("spawn"):
            self.board.publish(self.learner.actor, start)
            sync(self.device)
            self.control.set(WEIGHTS_VERSION, start)
            self._spawn_collector(start)
        assert self.process is not None
        self._say_startup("learner ready, collector spawned")  # every phase of this process so far
        # a prestarted collector began its env while the learner was built: one that failed meanwhile ends
        # the run now, with the message of the wait below, not after the capture
        death = self._collector_alive()
        if death is not None:
            raise PeerDied(f"{death} while {ENV_WAIT}")
        self._prepare_first_update(start)
        with PHASES.phase("waiting for the collector's env"):
            wait_until(
                lambda: self.control.get(COLLECTOR_READY) == 1,
                self._collector_alive,
                ENV_WAIT,
                self._wait_stop,
                watch=self._watch,
                spin=self._spin,
            )
        manifest = self._manifest()
        if self.on_collector_ready is not None:
            manifest.update(self.on_collector_ready(self.process.pid, self.control.read_device()))
        self.coord.barrier("every rank's collector built its env")
        self.reporter.started(manifest)

    def _prepare_first_update(self, start: int) -> None:
        """Capture the whole-cycle graph of the first update now, while the collector imports, builds its env
        and compiles its first tick: the compile and capture (37.8 s of a cold H200, benchmarks/
        2026-12-02_g1_walk_head_h200/) then overlap the collector's instead of following its first
        iterations (`learning_starts`), and the first update only replays. The warm-up iterations run on
        the empty ring (any window: only the shapes matter) and leave the learner's state as it was."""
        s = self.s
        if self.graph is None or s.updates_per_step <= 0 or start >= s.max_iterations:
            return
        self._beat.phase(self._train_phase())  # the first update's cycle: 'compiling or capturing'
        self.sampler.set_window(0, 1)
        with PHASES.phase("graph capture"):
            self.graph.prepare(self.sampler.sample, s.updates_per_step)
        self._say_startup("learner's first update captured", ("graph capture",))

    def _say_startup(self, what: str, names: tuple[str, ...] | None = None) -> None:
        """One start-up line of these phases (None: all so far)."""
        if self.s.report_startup:
            phases = list(PHASES.phases) if names is None else [p for p in map(PHASES.last, names) if p is not None]
            print(console_line(what, phases, PHASES.origin), flush=True)

    def _report_startup(self) -> None:
        """Hand both processes' start-up phases to on_startup, once."""
        if self._startup_reported:
            return
        self._startup_reported = True
        text = self.control.read_startup() if self.control is not None else ""
        try:
            collector = json.loads(text) if text else None
        except ValueError:  # cut at the buffer's size: the learner's half is still worth writing
            collector = None
        if self.on_startup is not None:
            self.on_startup(merged_record(PHASES.record(), collector))

    @staticmethod
    def _record_ending(ending: _Ending, e: BaseException) -> None:
        """Map a loop ending (runtime/outcome.py) onto the run's status."""
        outcome = outcome_of(e)
        assert outcome is not None
        ending.status, ending.failed_part = outcome.status, outcome.failed_part
        ending.keep_last_checkpoint = outcome.keep_last_checkpoint
        if outcome.status in ("failed", "refused"):
            ending.error = str(e)
        if isinstance(e, PhaseInterrupted):
            os.write(2, f"duorl: {signal.Signals(e.signum).name} while the learner was {e.phase}: stopped at "
                        f"once; that iteration is abandoned and not saved, the last checkpoint stays the run's\n"
                        .encode())

    def _final_checkpoint(self, ending: _Ending, start: int, k: int) -> None:
        """Write the checkpoint at the boundary the run stopped at, where the run keeps one."""
        if ending.keep_last_checkpoint or ending.status == "refused" or ending.failed_part == "run directory":
            return
        # with peers the final checkpoint is gathered from every rank, so a rank that failed alone
        # (its peers are elsewhere in the loop) keeps the last periodic one instead; a run that
        # failed before its first iteration has nothing to keep (an untrained learner); a run
        # whose directory refused a write (a full disk) writes nothing more there
        if ending.status == "failed" and not (self.coord.world_size == 1 and k > start):
            return
        try:
            self.reporter.checkpoint(k, self._env_steps(k), final=True, runtime_state=self._runtime_state(k))
        except WriteFailed as e:
            ending.status, ending.error, ending.failed_part = "failed", str(e), "run directory"

    def _result(self, ending: _Ending, k: int, t_start: float) -> DuoResult:
        return DuoResult(
            status=ending.status,
            iterations=k,
            env_steps=self._env_steps(k),
            wall_s=time.perf_counter() - t_start,
            error=ending.error,
            last_metrics=ending.last_metrics,
            replay_window_violations=self.sampler.violations,
            replay_samples_checked=self.sampler.samples_checked,
            graph=self.graph.state() if self.graph is not None else None,
            tick_graph_active=self.tick_graph_active,
            wall_limited=self.wall_limited,
            failed_part=ending.failed_part,
        )

    def _restore(self) -> int:
        """Apply a resume state; returns the first iteration to run."""
        self.replay_origin = 0
        r = self.resume
        if r is None:
            return 0
        self.sampler.generator.set_state(r.replay_generator)
        if r.replay is not None:
            for key, t in self.ring.t.items():
                t.copy_(r.replay[key])
            self.replay_origin = r.replay_origin
        else:
            # without the ring, only ticks collected after the resume exist
            self.replay_origin = r.iteration * self.s.env_steps_per_sync
        # every tick before the boundary counts as written: learner iteration r.iteration needs no wait
        self.control.set(TICKS_WRITTEN, r.iteration * self.s.env_steps_per_sync)
        return r.iteration

    def _runtime_state(self, boundary: int) -> dict[str, Any]:
        """The runtime's part of a checkpoint at an iteration boundary."""
        from duorl.runtime.collector import snapshot_path

        collector = None
        if self.s.snapshot_dir is not None:
            path = snapshot_path(self.s.snapshot_dir, boundary)
            if os.path.exists(path):
                collector = torch.load(path, map_location="cpu", weights_only=False)
                os.remove(path)
        return {
            "replay_generator": self.sampler.generator.get_state(),
            "collector": collector,
            "replay": {k: v for k, v in self.ring.t.items()} if self.s.config.training.checkpoint_replay else None,
            "replay_origin": self.replay_origin,
            "replay_bytes": self.layout.nbytes(),
        }

    def _env_steps(self, iterations: int) -> int:
        """The env steps of `iterations` iterations: env_steps_per_sync ticks of num_envs envs each. The one
        count of metrics rows, checkpoints and the summary; the collector's progress counter at that
        moment may be an iteration behind or ahead."""
        return iterations * self.s.env_steps_per_sync * self.s.num_envs

    def _loop(self, start: int, stop: Callable[[], bool], t_start: float) -> dict[str, float]:
        """Iterations start..max_iterations-1 (or until the ranks agree to stop); the last logged row."""
        s = self.s
        timer = PhaseTimer(self.device)
        metrics = IterationMetrics(s.num_envs, s.config.training.eval_envs, s.env_steps_per_sync,
                                   tuple(self.spec.metric_names), time.perf_counter())
        metrics_dev: dict[str, torch.Tensor] = {}
        last: dict[str, float] = {}
        finite = FinitenessCheck(self._skipped_so_far())
        for k in range(start, s.max_iterations):
            if self._agreed_stop(stop, t_start):
                break
            t_iter = time.perf_counter()
            waited = self._wait_for_ticks(k)
            cstats = self.control.read_stats(k - 1) if k > start else None
            self._observe_new_ticks(k)
            trained = self._train(k, timer)
            if trained is not None:
                metrics_dev = trained
            if s.config.debug.learner_delay_ms > 0:
                time.sleep(s.config.debug.learner_delay_ms / 1e3)
            t_pub = time.perf_counter()
            self._publish(k)
            t_end = time.perf_counter()
            self._done_iterations = k + 1
            self._startup_milestones(k, start, trained is not None)
            metrics.add((t_end - t_iter) * 1e3, waited * 1e3, (t_end - t_pub) * 1e3, cstats)
            finite.add(cstats, s.updates_per_step if trained is not None else 0)
            if cstats is not None and cstats.get("collector_tick_graph") == 1.0:
                self.tick_graph_active = True
            if (k + 1) % s.config.training.log_interval == 0 or k == s.max_iterations - 1:
                last = self._write(self._log(k, metrics, timer, metrics_dev, t_start), finite, last)
            if (k + 1) % s.config.algo.save_interval == 0 and k + 1 < s.max_iterations:
                last = self._write(self._row_in_flight(), finite, last)  # the rows before the checkpoint
                self._periodic_checkpoint(k)
        return self._write(self._row_in_flight(), finite, last)

    def _row_in_flight(self) -> list[Row]:
        """The row an event publish has not written yet (runtime/deferred_rows.py), read; else nothing."""
        return self._rows.flush() if self._rows is not None else []

    def _write(self, rows: list[Row], finite: FinitenessCheck, last: dict[str, float]) -> dict[str, float]:
        """Write these rows; the last row written."""
        for row in rows:
            self.reporter.log(row.iteration, row.env_steps, row.wall_s, row.metrics)
            finite.row(row.iteration, row.metrics.get("Train/skipped_updates"))  # after it: the file shows the counts
            last = row.metrics
        return last

    def _skipped_so_far(self) -> float:
        """The learner's Train/skipped_updates before this run's first iteration (a resumed run's count;
        one read before the loop), 0 for a learner that counts none."""
        skipped = getattr(self.learner, "skipped_updates", None)
        return float(skipped) if skipped is not None else 0.0

    def _startup_milestones(self, k: int, start: int, trained: bool) -> None:
        """The first iteration, the first one on collected ticks, the first update: the last ends start-up."""
        if self._startup_reported:
            return
        if k == start:
            PHASES.mark("first iteration")
        if k == start + 1:
            PHASES.mark("first iteration on collected ticks")
        if trained:
            PHASES.mark("first update")
            self._report_startup()

    def _agreed_stop(self, stop: Callable[[], bool], t_start: float) -> bool:
        """Whether every rank stops before this iteration (a stop request or max_wall_s)."""
        s = self.s
        wall = s.max_wall_s is not None and time.perf_counter() - t_start >= s.max_wall_s
        verdict = self.coord.agree_stop(stop(), wall)
        if verdict.stop:
            self.wall_limited = verdict.wall_limited
        return verdict.stop

    def _wait_for_ticks(self, k: int) -> float:
        """Wait until every tick < k*s is in replay; the seconds waited."""
        hi = k * self.s.env_steps_per_sync
        return wait_until(
            lambda: self.control.get(TICKS_WRITTEN) >= hi,
            self._collector_alive,
            f"the learner waited for ticks < {hi} (iteration {k})",
            self._wait_stop,
            watch=self._watch,
            spin=self._spin,
        )

    def _observe_new_ticks(self, k: int) -> None:
        """Hand the learner the observations (and rewards) of the ticks iteration k-1 collected."""
        sps = self.s.env_steps_per_sync
        if k > 0 and (k - 1) * sps >= self.replay_origin:
            new_a, new_c = self.ring.ticks_obs((k - 1) * sps, k * sps)
            self.learner.observe(new_a, new_c)
            self.learner.observe_rewards(*self.ring.ticks_rewards((k - 1) * sps, k * sps))

    def _train(self, k: int, timer: PhaseTimer) -> dict[str, torch.Tensor] | None:
        """Iteration k's updates on the readable window; their metrics, or None before learning starts."""
        s = self.s
        hi = k * s.env_steps_per_sync
        if hi - self.replay_origin < max(s.config.algo.learning_starts, 1) or s.updates_per_step <= 0:
            return None
        lo, hi = readable_window(k, s.env_steps_per_sync, s.buffer_size)
        self.sampler.set_window(max(lo, self.replay_origin), hi)
        poisoned = self.loss_poison is not None and k == s.nan_loss_iteration
        if poisoned:
            self.loss_poison[0] = float("nan")
        self._beat.phase(self._train_phase())
        with timer.phase("learner_train_ms"):
            train = self.graph.train_iteration if self.graph is not None else self.learner.train_iteration
            metrics_dev = train(self.sampler.sample, s.updates_per_step)
        if poisoned:
            self.loss_poison.zero_()
        return metrics_dev

    def _publish(self, k: int) -> None:
        """Publish W_{k+1}; after the last iteration, tell the collector to stop instead."""
        self._beat.phase("publishing weights")
        if k == self.s.max_iterations - 1:
            # no collector iteration needs W_max: let the collector stop instead of running it
            self.control.set(FINAL_BOUNDARY, self.s.max_iterations)
            self.control.set(STOP, 1)
        self.board.publish(self.learner.actor, k + 1)
        if self.board.publisher_syncs:
            sync(self.device)  # the publish: weights are in memory before the version says so
        self.control.set(WEIGHTS_VERSION, k + 1)

    def _log(self, k: int, metrics: IterationMetrics, timer: PhaseTimer, metrics_dev: dict[str, torch.Tensor],
             t_start: float) -> list[Row]:
        """Take iteration k's row; the rows to write now: this one after the publish's sync, or (event
        publish, which queued the update without waiting) the row before it (runtime/deferred_rows.py)."""
        now = time.perf_counter()
        env_steps = self._env_steps(k + 1)
        if self._rows is not None:
            return self._rows.queue(k + 1, env_steps, now - t_start, metrics.host_row(env_steps, now), timer.take(),
                                    metrics_dev)
        row = metrics.row(env_steps, now, timer.collect().get("learner_train_ms"), metrics_dev)
        return [Row(k + 1, env_steps, now - t_start, row)]

    def _periodic_checkpoint(self, k: int) -> None:
        # the collector leaves its state at this boundary when it finishes iteration k
        wait_until(
            lambda: self.control.get(TICKS_WRITTEN) >= (k + 1) * self.s.env_steps_per_sync,
            self._collector_alive,
            f"the learner waited for the collector's state at iteration {k + 1}",
            self._wait_stop,
            watch=self._watch,
            spin=self._spin,
        )
        self.reporter.checkpoint(k + 1, self._env_steps(k + 1), final=False, runtime_state=self._runtime_state(k + 1))

    def _train_phase(self) -> str:
        """'compiling or capturing' the first time an update cycle runs (torch.compile compiles it, a
        whole-cycle graph captures it; both key on the learner's cycle), else 'training'."""
        key = self.learner.cycle_key(self.s.updates_per_step)
        if key in self._cycles_seen:
            return "training"
        self._cycles_seen.add(key)
        return "compiling or capturing"

    def _manifest(self) -> dict[str, Any]:
        assert self.process is not None
        return {
            "topology": "duo",
            "learner_pid": os.getpid(),
            "collector_pid": self.process.pid,
            "device": str(self.device),
            "collector_device": self.control.read_device(),
            "policy_lag_iterations": POLICY_LAG_ITERATIONS,
            "env_steps_per_sync": self.s.env_steps_per_sync,
            "replay_capacity_transitions": self.layout.transitions,
            "replay_bytes": self.layout.nbytes(),
            "weight_board_floats": int(self.board.slots.shape[1]),
            "weight_publish": "sync" if self.board.publisher_syncs else "event",
        }

    def _shutdown(self, final_boundary: int = 0) -> None:
        """Stop the collector; never leave it behind. It leaves its state at `final_boundary`."""
        if self.graph is not None:
            self.graph.release()  # graphs go before anything they reference (and, later, the process group)
        if self.control is None:
            return
        self._beat.phase("stopping")
        self.control.set(FINAL_BOUNDARY, final_boundary)
        self.control.set(STOP, 1)
        p = self.process
        if p is None:
            return
        # a stalled collector cannot stop by itself: it is ended at once
        shutdown_collector(p, stalled=self._watch is not None and self._watch.peer_stalled)
        if self.device.type == "cuda":
            # release the CUDA IPC blocks the collector held, so the learner's exit finds none in use
            torch.cuda.ipc_collect()
