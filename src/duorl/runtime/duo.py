"""One duo: the learner loop in this process and a spawned collector process (docs/design.md §3).

Learner iteration k: wait until every tick < k*s is in replay, train `updates_per_step` updates on
ticks the collector cannot be writing, publish W_{k+1}. Collector iteration k runs with W_k. The policy
lag is exactly one iteration and results do not depend on process timing.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Protocol

import torch
import torch.multiprocessing as mp
from torch import nn

from duorl.envs.base import EnvSpec
from duorl.gpu.graphs import GraphCaptureError
from duorl.runtime.collector import CollectorArgs, collector_main, remove_snapshots
from duorl.runtime.coordination import RankCoordinator, RankLost, Solo
from duorl.runtime.heartbeat import Heartbeat, PeerWatch
from duorl.runtime.liveness import PhasedCoordinator, PhasedReporter, shutdown_collector
from duorl.runtime import stop_signals
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
    StopRequested,
    spins_while_waiting,
    wait_until,
)
from duorl.runtime.iteration_metrics import IterationMetrics
from duorl.runtime.replay import ReplayLayout, ReplayRing, ReplaySampler, readable_window
from duorl.runtime.settings import DuoSettings
from duorl.runtime.timing import PhaseTimer, sync
from duorl.runtime.weights import WeightBoard

POLICY_LAG_ITERATIONS = 1


@dataclass
class ResumeState:
    """What a checkpoint gives the runtime back (the learner's own state is restored by its owner)."""

    iteration: int  # the iteration boundary the checkpoint was taken at
    replay_generator: torch.Tensor
    collector: dict[str, Any] | None  # the collector's state at that boundary (None: fresh envs)
    replay: dict[str, torch.Tensor] | None  # the ring's tensors (None: refill replay after resume)
    replay_origin: int = 0  # the first tick the saved ring holds (an earlier resume without replay)


class StartRefused(RuntimeError):
    """A check that needs both processes running (e.g. CUDA MPS clients) refused the run: it ends at
    once, as refused input rather than a failure during training."""


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


class _StopFlag:
    """SIGINT/SIGTERM set a flag the loop checks at every wait and iteration boundary, or, in a phase
    `interruptible` names, abandon it at once (PhaseInterrupted); a second SIGINT interrupts at once
    (without peers: `second_sigint_interrupts`)."""

    def __init__(self, second_sigint_interrupts: bool = True, requested: Callable[[], bool] = lambda: False,
                 interruptible: Callable[[], str | None] = lambda: None) -> None:
        # a stop requested before the loop (runtime/stop_signals.py, installed at process start) counts
        self.signal: int | None = stop_signals.early_stop_signal()
        self.second_sigint_interrupts = second_sigint_interrupts
        self.requested = requested  # a stop asked for elsewhere (the collector got a SIGTERM)
        # the current phase when a signal must not wait for its end (INTERRUPTIBLE_PHASES), else None
        self.interruptible = interruptible
        self._old: dict[int, Any] = {}

    def __enter__(self) -> "_StopFlag":
        self._old = stop_signals.install(self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if stop_signals.stops_at_once(self.signal, signum, self.second_sigint_interrupts):
            raise KeyboardInterrupt
        self.signal = signum
        phase = self.interruptible()
        if phase is not None:
            raise PhaseInterrupted(signum, phase)

    def __call__(self) -> bool:
        return self.signal is not None or self.requested()

    def __exit__(self, *exc: Any) -> None:
        stop_signals.restore(self._old)


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
        self.device = torch.device(settings.device)
        self._spin = spins_while_waiting(self.device)
        self.process: mp.Process | None = None
        self._watch: PeerWatch | None = None
        self._done_iterations = 0
        self.tick_graph_active = False
        self.wall_limited = False  # stopped by max_wall_s (a completed run, at an earlier boundary)

    # -- setup ---------------------------------------------------------------------------------
    def _allocate(self) -> None:
        s, spec = self.s, self.spec
        self.layout = ReplayLayout(s.num_envs, s.buffer_size, spec.actor_obs_dim, spec.critic_obs_dim, spec.action_dim)
        self.ring = ReplayRing.allocate(self.layout, self.device)
        self.board = WeightBoard.allocate(self.learner.actor, self.device)
        self.control = ControlBlock.allocate()
        self._beat = Heartbeat(self.control, "learner", s.stall)
        # the learner's phase follows its calls into the other ranks and into the run directory
        self.coord = PhasedCoordinator(self.coord, self._beat)
        self.reporter = PhasedReporter(self.reporter, self._beat)
        self._cycles_seen: set[Any] = set()
        gen = torch.Generator(device=self.device)
        gen.manual_seed(s.replay_seed)
        self.sampler = ReplaySampler(self.ring, gen, check_window=s.check_replay_window, age_bias=s.replay_age_bias)
        # before any capture: a captured graph reads the offsets from this buffer
        self.loss_poison = self.learner.poison_losses(s.updates_per_step) if s.nan_loss_iteration >= 0 else None
        self.graph = None
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
            board_slots=self.board.slots,
            board_layout=self.board.layout,
            control=self.control,
            start_iteration=start_iteration,
            restore=self.resume.collector if self.resume is not None else None,
            learner_pid=os.getpid(),
            # a data-parallel learner waits for the other ranks inside its update: its collector allows it more
            stall=replace(s.stall, peer_factor=2.0 if self.coord.world_size > 1 else 1.0),
        )
        ctx = mp.get_context("spawn")
        # daemon: multiprocessing terminates it if this process exits on an unhandled path
        self.process = ctx.Process(target=collector_main, args=(args,), name="duorl-collector", daemon=True)
        self.process.start()
        self._watch = PeerWatch(self.control, self._beat, self.process.pid, s.stall)

    def _collector_alive(self) -> str | None:
        p = self.process
        assert p is not None
        if self.control.get(COLLECTOR_FAILED):
            return f"collector (pid {p.pid}) failed: {self.control.read_error().strip()}"
        if not p.is_alive():
            p.join(timeout=0.1)
            code = p.exitcode
            how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited with code {code}"
            return f"collector (pid {p.pid}) {how} in phase '{self.control.phase()}'"
        return None

    # -- the loop ------------------------------------------------------------------------------
    def run(self) -> DuoResult:
        s = self.s
        t_start = time.perf_counter()
        self._allocate()
        start = self._restore()
        self._done_iterations = start
        k = start
        status, error = "completed", None
        failed_part: str | None = None
        last: dict[str, float] = {}
        # with peers, a second Ctrl-C is the launcher passing the first one on, not a user's "now"
        # alone, a signal abandons a compile or capture (minutes on a loaded machine) instead of waiting
        # for its end; with peers every rank stops at the same boundary (the stop agreement)
        in_long_phase = (lambda: self._beat.current if self._beat.current in INTERRUPTIBLE_PHASES else None) \
            if self.coord.local_stops else (lambda: None)
        keep_last_checkpoint = False
        with _StopFlag(second_sigint_interrupts=self.coord.local_stops,
                       requested=lambda: self.control.get(STOP_REQUESTED) == 1, interruptible=in_long_phase) as stop:
            self._wait_stop = stop if self.coord.local_stops else (lambda: False)
            try:
                self.board.publish(self.learner.actor, start)
                sync(self.device)
                self.control.set(WEIGHTS_VERSION, start)
                self._spawn_collector(start)
                assert self.process is not None
                wait_until(
                    lambda: self.control.get(COLLECTOR_READY) == 1,
                    self._collector_alive,
                    "the learner waited for the collector to build its env",
                    self._wait_stop,
                    watch=self._watch,
                    spin=self._spin,
                )
                manifest = self._manifest()
                if self.on_collector_ready is not None:
                    manifest.update(self.on_collector_ready(self.process.pid, self.control.read_device()))
                self.coord.barrier("every rank's collector built its env")
                self.reporter.started(manifest)
                last = self._loop(start, stop, t_start)
            except StopRequested:
                status = "interrupted"
            except PhaseInterrupted as e:
                status, keep_last_checkpoint = "interrupted", True
                os.write(2, f"duorl: {signal.Signals(e.signum).name} while the learner was {e.phase}: stopped at once; "
                            f"that iteration is abandoned and not saved, the last checkpoint stays the run's\n".encode())
            except PeerDied as e:
                status, error, failed_part = "failed", str(e), "collector"
            except RankLost as e:
                status, error, failed_part = "failed", str(e), "peer rank"
            except StartRefused as e:
                status, error = "refused", str(e)
            except GraphCaptureError as e:
                status, error, failed_part = "failed", str(e), "learner (whole-cycle graph capture)"
            except KeyboardInterrupt:
                status = "interrupted"
            except BaseException as e:
                self._shutdown()
                raise e
            finally:
                k = self._done_iterations
        self._shutdown(final_boundary=k)
        if status == "completed" and stop():
            status = "interrupted"
        env_steps = self._env_steps(k)
        if not keep_last_checkpoint and status != "refused" and (
                status != "failed" or (self.coord.world_size == 1 and k > start)):
            # with peers the final checkpoint is gathered from every rank, so a rank that failed alone
            # (its peers are elsewhere in the loop) keeps the last periodic one instead; a run that
            # failed before its first iteration has nothing to keep (an untrained learner)
            self.reporter.checkpoint(k, env_steps, final=True, runtime_state=self._runtime_state(k))
        if self.s.snapshot_dir is not None:
            remove_snapshots(self.s.snapshot_dir)  # states the collector left for boundaries never reached
        return DuoResult(
            status=status,
            iterations=k,
            env_steps=env_steps,
            wall_s=time.perf_counter() - t_start,
            error=error,
            last_metrics=last,
            replay_window_violations=self.sampler.violations,
            replay_samples_checked=self.sampler.samples_checked,
            graph=self.graph.state() if self.graph is not None else None,
            tick_graph_active=self.tick_graph_active,
            wall_limited=self.wall_limited,
            failed_part=failed_part,
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
            "replay": {k: v for k, v in self.ring.t.items()} if self.s.checkpoint_replay else None,
            "replay_origin": self.replay_origin,
            "replay_bytes": self.layout.nbytes(),
        }

    def _env_steps(self, iterations: int) -> int:
        """The env steps of `iterations` iterations: env_steps_per_sync ticks of num_envs envs each. The one
        count of metrics rows, checkpoints and the summary; the collector's progress counter at that
        moment may be an iteration behind or ahead."""
        return iterations * self.s.env_steps_per_sync * self.s.num_envs

    def _loop(self, start: int, stop: _StopFlag, t_start: float) -> dict[str, float]:
        s = self.s
        n, sps = s.num_envs, s.env_steps_per_sync
        timer = PhaseTimer(self.device)
        metrics = IterationMetrics(n, s.eval_envs, sps, tuple(self.spec.metric_names), time.perf_counter())
        metrics_dev: dict[str, torch.Tensor] = {}
        last: dict[str, float] = {}
        for k in range(start, s.max_iterations):
            wall = s.max_wall_s is not None and time.perf_counter() - t_start >= s.max_wall_s
            verdict = self.coord.agree_stop(stop(), wall)
            if verdict.stop:
                self.wall_limited = verdict.wall_limited
                break
            t_iter = time.perf_counter()
            hi = k * sps
            waited = wait_until(
                lambda: self.control.get(TICKS_WRITTEN) >= hi,
                self._collector_alive,
                f"the learner waited for ticks < {hi} (iteration {k})",
                self._wait_stop,
                watch=self._watch,
                spin=self._spin,
            )
            cstats = self.control.read_stats(k - 1) if k > start else None
            origin = self.replay_origin
            if k > 0 and (k - 1) * sps >= origin:
                new_a, new_c = self.ring.ticks_obs((k - 1) * sps, hi)
                self.learner.observe(new_a, new_c)
                if hasattr(self.learner, "observe_rewards"):
                    self.learner.observe_rewards(*self.ring.ticks_rewards((k - 1) * sps, hi))
            if hi - origin >= max(s.learning_starts, 1) and s.updates_per_step > 0:
                lo, hi = readable_window(k, sps, s.buffer_size)
                self.sampler.set_window(max(lo, origin), hi)
                poisoned = self.loss_poison is not None and k == s.nan_loss_iteration
                if poisoned:
                    self.loss_poison[0] = float("nan")
                self._beat.phase(self._train_phase())
                with timer.phase("learner_train_ms"):
                    train = self.graph.train_iteration if self.graph is not None else self.learner.train_iteration
                    metrics_dev = train(self.sampler.sample, s.updates_per_step)
                if poisoned:
                    self.loss_poison.zero_()
            if s.learner_delay_ms > 0:
                time.sleep(s.learner_delay_ms / 1e3)
            t_pub = time.perf_counter()
            self._beat.phase("publishing weights")
            if k == s.max_iterations - 1:
                # no collector iteration needs W_max: let the collector stop instead of running it
                self.control.set(FINAL_BOUNDARY, s.max_iterations)
                self.control.set(STOP, 1)
            self.board.publish(self.learner.actor, k + 1)
            sync(self.device)  # the publish: weights are in memory before the version says so
            self.control.set(WEIGHTS_VERSION, k + 1)
            t_end = time.perf_counter()
            self._done_iterations = k + 1
            metrics.add((t_end - t_iter) * 1e3, waited * 1e3, (t_end - t_pub) * 1e3, cstats)
            if cstats is not None and cstats.get("collector_tick_graph") == 1.0:
                self.tick_graph_active = True

            if (k + 1) % s.log_interval == 0 or k == s.max_iterations - 1:
                now = time.perf_counter()
                env_steps = self._env_steps(k + 1)
                m = metrics.row(env_steps, now, timer.collect().get("learner_train_ms"), metrics_dev)
                self.reporter.log(k + 1, env_steps, now - t_start, m)
                last = m
            if (k + 1) % s.save_interval == 0 and k + 1 < s.max_iterations:
                # the collector leaves its state at this boundary when it finishes iteration k
                wait_until(
                    lambda: self.control.get(TICKS_WRITTEN) >= (k + 1) * sps,
                    self._collector_alive,
                    f"the learner waited for the collector's state at iteration {k + 1}",
                    self._wait_stop,
                    watch=self._watch,
                    spin=self._spin,
                )
                self.reporter.checkpoint(
                    k + 1, self._env_steps(k + 1), final=False, runtime_state=self._runtime_state(k + 1)
                )
        return last

    def _train_phase(self) -> str:
        """'compiling or capturing' the first time an update cycle runs (torch.compile compiles it, a
        whole-cycle graph captures it; both key on the learner's cycle), else 'training'."""
        key = self.learner.cycle_key(self.s.updates_per_step) if hasattr(self.learner, "cycle_key") else None
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
        }

    def _shutdown(self, final_boundary: int = 0) -> None:
        """Stop the collector; never leave it behind. It leaves its state at `final_boundary`."""
        if getattr(self, "graph", None) is not None:
            self.graph.release()  # graphs go before anything they reference (and, later, the process group)
        if not hasattr(self, "control"):
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
