"""The control block: small CPU shared-memory counters and per-iteration collector statistics.

Counters only move forward and each has one writer, so plain stores are enough: the learner writes
`weights_version`, `stop`, `final_boundary` and its own liveness slots (LEARNER_*); the collector
writes everything else. A writer finishes the GPU work a
counter announces (stream sync) before it stores the counter.
"""

from __future__ import annotations

import os
import time
import traceback
from dataclasses import dataclass
from typing import Callable, Protocol

import torch

from duorl.envs.base import MAX_TASK_METRICS

# int64 slots of the control block
TICKS_WRITTEN = 0  # collector: every tick < this is in replay
WEIGHTS_VERSION = 1  # learner: W_v is readable in board slot v % 2
STOP = 2  # learner: 1 = collector should exit
COLLECTOR_READY = 3  # collector: env and actor built
COLLECTOR_FAILED = 4  # collector: 1 = it raised; message in the error buffer
COLLECTOR_PHASE = 5  # collector: what it is doing (a Phase value), for error messages
COLLECTOR_PID = 6
FINAL_BOUNDARY = 7  # learner: the iteration boundary of the final checkpoint (set before STOP)
STOP_REQUESTED = 8  # collector: a SIGTERM reached it; the learner stops the run cleanly
# liveness (runtime/heartbeat.py): each process's phase, a host timestamp (time.monotonic_ns, one
# clock for every process of the host) and its longest steady-state phase so far (microseconds)
LEARNER_PHASE = 9
LEARNER_BEAT_NS = 10
COLLECTOR_BEAT_NS = 11
LEARNER_STEADY_US = 12
COLLECTOR_STEADY_US = 13
N_SLOTS = 14

# collector statistics, one row per iteration parity (iteration k writes row k % 2)
STAT_FIELDS = (
    "iteration",
    "collector_env_step_ms",
    "collector_backend_step_ms",
    "collector_inference_ms",
    "collector_replay_write_ms",
    "collector_learner_wait_ms",
    "collector_iteration_ms",
    "collector_tick_ms",
    "collector_tick_graph",
    "episodes",
    "episode_return_sum",
    "episode_length_sum",
    "reward_sum",
    "nan_resets",
    # the NaN guard's first broken env, from the iteration that found it on (runtime/task_finiteness.py):
    # what was not finite (a mask over envs/base.py NON_FINITE_PARTS), the run's step (1-based), that env's
    # episode step and its index
    "nan_first_mask",
    "nan_first_step",
    "nan_first_episode_step",
    "nan_first_env",
    # the task's diagnostics (EnvSpec.metric_names), summed over the iteration's ticks
    *(f"task_metric_{i}" for i in range(MAX_TASK_METRICS)),
    # the same for the deterministic envs (training.eval_envs; not written without them)
    "eval_episodes",
    "eval_episode_return_sum",
    "eval_episode_length_sum",
    *(f"eval_task_metric_{i}" for i in range(MAX_TASK_METRICS)),
)
STAT = {name: i for i, name in enumerate(STAT_FIELDS)}

# what each process is doing, for stall bounds and error messages (runtime/heartbeat.py says which
# phases are long); "compiling or capturing": the first tick (compiled tensor code, the tick graph)
COLLECTOR_PHASES = ("starting", "building env", "waiting for weights", "stepping", "compiling or capturing",
                    "writing its state", "stopped")
LEARNER_PHASES = ("starting", "waiting for the collector", "waiting for the other ranks", "compiling or capturing",
                  "training", "publishing weights", "logging", "writing a checkpoint", "stopping")
# learner phases a SIGINT/SIGTERM abandons at once (PhaseInterrupted) rather than waiting for their end:
# they can outlast the 30 s a signalled run has to end, and abandoning them loses only that iteration
INTERRUPTIBLE_PHASES = ("compiling or capturing",)

ERROR_BYTES = 8192
DEVICE_BYTES = 128
STARTUP_BYTES = 16384  # the collector's start-up phases (JSON, duorl/startup_phases.py), a few kB


@dataclass
class ControlBlock:
    counters: torch.Tensor  # [N_SLOTS] int64, shared
    stats: torch.Tensor  # [2, len(STAT_FIELDS)] float64, shared
    error: torch.Tensor  # [ERROR_BYTES] uint8, shared
    # the collector: the device it actually opened ("GPU-<uuid>" or "cpu"), written before COLLECTOR_READY
    device: torch.Tensor  # [DEVICE_BYTES] uint8, shared
    # the collector: its start-up phases as JSON, written once, before it announces its first ticks
    startup: torch.Tensor  # [STARTUP_BYTES] uint8, shared

    @classmethod
    def allocate(cls) -> "ControlBlock":
        block = cls(
            counters=torch.zeros(N_SLOTS, dtype=torch.int64),
            stats=torch.zeros((2, len(STAT_FIELDS)), dtype=torch.float64),
            error=torch.zeros(ERROR_BYTES, dtype=torch.uint8),
            device=torch.zeros(DEVICE_BYTES, dtype=torch.uint8),
            startup=torch.zeros(STARTUP_BYTES, dtype=torch.uint8),
        )
        for t in (block.counters, block.stats, block.error, block.device, block.startup):
            t.share_memory_()
        return block

    def write_startup(self, record_json: str) -> None:
        _write_text(self.startup, record_json)

    def read_startup(self) -> str:
        return _read_text(self.startup)

    def write_device(self, name: str) -> None:
        _write_text(self.device, name)

    def read_device(self) -> str:
        return _read_text(self.device)

    def get(self, slot: int) -> int:
        return int(self.counters[slot])

    def set(self, slot: int, value: int) -> None:
        self.counters[slot] = value

    def set_phase(self, phase: str) -> None:
        self.set(COLLECTOR_PHASE, COLLECTOR_PHASES.index(phase))

    def phase(self) -> str:
        return COLLECTOR_PHASES[self.get(COLLECTOR_PHASE)]

    def write_error(self, message: str) -> None:
        _write_text(self.error, message)
        self.set(COLLECTOR_FAILED, 1)

    def read_error(self) -> str:
        return _read_text(self.error)

    def write_stats(self, iteration: int, values: dict[str, float]) -> None:
        row = self.stats[iteration % 2]
        row.fill_(float("nan"))
        row[STAT["iteration"]] = iteration
        for k, v in values.items():
            row[STAT[k]] = v

    def read_stats(self, iteration: int) -> dict[str, float] | None:
        row = self.stats[iteration % 2]
        if int(row[STAT["iteration"]]) != iteration:
            return None
        # NaN marks a field the collector did not measure this iteration
        return {k: float(row[i]) for i, k in enumerate(STAT_FIELDS) if row[i] == row[i]}


def _write_text(buf: torch.Tensor, text: str) -> None:
    data = text.encode("utf-8", "replace")[: buf.numel() - 1]
    buf.zero_()
    buf[: len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8)


def _read_text(buf: torch.Tensor) -> str:
    return bytes(buf.numpy().tobytes()).rstrip(b"\0").decode("utf-8", "replace")


class PeerDied(RuntimeError):
    """The other process of the duo is gone."""


class PeerStalled(PeerDied):
    """The other process of the duo is alive but its heartbeat stopped (stopped, deadlocked, a hung GPU)."""


class StopRequested(Exception):
    """A stop (SIGINT/SIGTERM or the learner's stop flag) arrived while waiting."""


class PhaseInterrupted(BaseException):
    """SIGINT/SIGTERM arrived during a phase that can outlast the 30 s a signalled run has to end (the
    learner compiling or capturing): raised from the signal handler, it abandons that iteration, whose
    half-done state is not saved (the last checkpoint stays the run's). A BaseException, so that the
    capture's own error handling (`except Exception`) does not turn it into a capture failure."""

    def __init__(self, signum: int, phase: str) -> None:
        super().__init__(signum, phase)
        self.signum, self.phase = signum, phase


class Watch(Protocol):
    """A waiter's view of its peer's heartbeat (runtime/heartbeat.PeerWatch)."""

    def enter(self) -> None: ...

    def poll(self, what: str) -> None: ...


def spins_while_waiting(device: torch.device) -> bool:
    """wait_until's `spin` for a process on `device`: a CPU process does not spin, since its peer
    computes on the same cores."""
    return device.type != "cpu"


def wait_until(
    ready: Callable[[], bool],
    peer_alive: Callable[[], str | None],
    what: str,
    stop_requested: Callable[[], bool] = lambda: False,
    watch: Watch | None = None,
    spin: bool = True,
) -> float:
    """Spin-then-sleep until `ready()`; between polls check the peer (`peer_alive` returns None while
    alive, else a description of its death) and stop requests. The wait itself has no deadline; with a
    `watch`, this process beats while it waits, a peer whose heartbeat stopped for longer than its
    phase's bound raises PeerStalled, and a long wait says what it awaits. Returns the seconds waited.

    spin=False polls every millisecond from the start. A process on the CPU passes it
    (spins_while_waiting): its peer computes on the same cores, and the 2000 spins (each poll is tens
    of microseconds of Python) burned 40-60 ms of a core per wait, ~30% of a core for a collector
    waiting 130 ms per iteration on a CPU learner (the pendulum on 2 cores), while an iteration of
    milliseconds loses nothing to a 1 ms poll."""
    t0 = time.perf_counter()
    spins = 0
    if watch is not None:
        watch.enter()
    while not ready():
        death = peer_alive()
        if death is not None:
            raise PeerDied(f"{death} while {what}")
        if watch is not None:
            watch.poll(what)
        if stop_requested():
            raise StopRequested(what)
        spins += 1
        # tight polling first (iterations can be sub-millisecond on a GPU), then back off to 1 ms
        if spins > 2000 or not spin:
            time.sleep(0.001)
        elif spins > 200:
            time.sleep(0)
    return time.perf_counter() - t0


def format_exception() -> str:
    return f"[pid {os.getpid()}] " + traceback.format_exc()
