"""Heartbeats and stall detection of one duo (docs/design.md §3 liveness).

Each process publishes, in the control block, its phase and a host timestamp (`time.monotonic_ns`:
one clock for every process of the host) whenever its phase changes and on every poll while it
waits. That is a plain store into shared CPU memory: no device sync, nothing added to an iteration's
GPU work. A process blocked for real (SIGSTOP, a deadlock, a hung GPU call: the publish's stream sync
never returns) stops beating. Its peer notices while it waits for it (`wait_until(..., watch=...)`):
a heartbeat older than the bound of the phase it was published in ends the run with PeerStalled,
naming the process, its pid, its phase and its last progress.

Bounds. Long phases (starting a process, building envs, compiling, capturing CUDA graphs, writing
checkpoints, waiting for other ranks) may legitimately run minutes without a beat:
`training.stall_compile_timeout_s`. Every other phase is steady state: `training.stall_timeout_s`,
but never below `iteration_multiple` times the longest steady phase the peer has measured itself so
far (so a slow machine or a huge batch does not turn into false alarms). Under data parallel on CUDA
the learner's update waits inside NCCL collectives for the other ranks without beating, so its
collector allows it `peer_factor` times the steady bound: a stalled peer rank is named by its own duo
first (a gloo rank beats while it waits: distributed/collective_wait.py).

While a wait lasts longer than `report_every_s`, the waiter says what it awaits, again at that
interval (stderr); a peer that has not beaten for a whole interval in a phase where it always beats is
frozen, not waiting, and is named so once.
"""

from __future__ import annotations

import math
import os
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

from duorl.runtime.control import (
    COLLECTOR_BEAT_NS,
    COLLECTOR_PHASE,
    COLLECTOR_PHASES,
    COLLECTOR_STEADY_US,
    LEARNER_BEAT_NS,
    LEARNER_PHASE,
    LEARNER_PHASES,
    LEARNER_STEADY_US,
    TICKS_WRITTEN,
    WEIGHTS_VERSION,
    ControlBlock,
    PeerStalled,
)

LEARNER, COLLECTOR = "learner", "collector"
PHASES: dict[str, tuple[str, ...]] = {LEARNER: LEARNER_PHASES, COLLECTOR: COLLECTOR_PHASES}
# (phase slot, heartbeat slot, steady-phase slot) of each side
_SLOTS = {LEARNER: (LEARNER_PHASE, LEARNER_BEAT_NS, LEARNER_STEADY_US),
          COLLECTOR: (COLLECTOR_PHASE, COLLECTOR_BEAT_NS, COLLECTOR_STEADY_US)}
# what each side's waits are called
WAITING = {LEARNER: "waiting for the collector", COLLECTOR: "waiting for weights"}
# phases that may run minutes without a beat: training.stall_compile_timeout_s
LONG_PHASES = frozenset({
    "starting", "building env", "compiling or capturing", "writing a checkpoint", "writing its state",
    "waiting for the other ranks",
})
# a process that is leaving is not judged (its peer's liveness check sees it go)
DONE_PHASES = frozenset({"stopping", "stopped"})
# phases whose durations are not the process's own work (measured only for busy steady phases)
_NOT_WORK = LONG_PHASES | DONE_PHASES | frozenset(WAITING.values())


@dataclass(frozen=True)
class StallBounds:
    steady_s: float = 120.0  # training.stall_timeout_s
    long_s: float = 900.0  # training.stall_compile_timeout_s
    report_every_s: float = 30.0  # training.wait_report_s
    # the steady bound is never below this multiple of the peer's longest steady phase measured so far
    iteration_multiple: float = 50.0
    # applied to the steady bound of the learner as its collector sees it (data parallel: 2)
    peer_factor: float = 1.0
    # fault tests (debug.slow_phase / slow_phase_s): "side:phase" lingers this long, beating
    slow_phase: str | None = None
    slow_phase_s: float = 0.0

    @classmethod
    def of(cls, cfg: Any) -> "StallBounds":
        """The bounds a Config sets (training.stall_*, training.wait_report_s, debug.slow_phase*)."""
        t, d = cfg.training, cfg.debug
        return cls(steady_s=float(t.stall_timeout_s), long_s=float(t.stall_compile_timeout_s),
                   report_every_s=float(t.wait_report_s), slow_phase=d.slow_phase, slow_phase_s=float(d.slow_phase_s))

    def key(self, phase: str) -> str:
        return "training.stall_compile_timeout_s" if phase in LONG_PHASES else "training.stall_timeout_s"


def known_phase(spec: str) -> bool:
    """'learner:PHASE' or 'collector:PHASE' naming a real phase (debug.slow_phase)."""
    side, _, phase = spec.partition(":")
    return phase in PHASES.get(side, ())


class Heartbeat:
    """This process's side of the control block: its phase and its heartbeat."""

    def __init__(self, control: ControlBlock, side: str, bounds: StallBounds = StallBounds()) -> None:
        self.side = side
        self.names = PHASES[side]
        self._phase_slot, self._beat_slot, self._steady_slot = _SLOTS[side]
        # a numpy view of the shared counters: a store is ~100 ns, a torch setitem ~2 us
        self._c = control.counters.numpy()
        self._since = time.monotonic_ns()
        side_of_slow, _, slow = (bounds.slow_phase or "").partition(":")
        self._slow = slow if side_of_slow == side and bounds.slow_phase_s > 0 else None
        self._slow_s = bounds.slow_phase_s

    @property
    def current(self) -> str:
        return self.names[int(self._c[self._phase_slot])]

    def beat(self) -> None:
        self._c[self._beat_slot] = time.monotonic_ns()

    def age_s(self) -> float:
        """Seconds since this process last beat (read by a data-parallel rank's beat publisher)."""
        return max(0.0, (time.monotonic_ns() - int(self._c[self._beat_slot])) / 1e9)

    def phase(self, name: str) -> None:
        """Enter phase `name` (and beat). A busy steady phase that ends updates the longest one."""
        now = time.monotonic_ns()
        index = self.names.index(name)
        if self.current not in _NOT_WORK:
            spent_us = (now - self._since) // 1000
            if spent_us > self._c[self._steady_slot]:
                self._c[self._steady_slot] = spent_us
        self._c[self._phase_slot] = index
        self._c[self._beat_slot] = now
        self._since = now
        if name == self._slow:
            self._linger()

    def _linger(self) -> None:
        """debug.slow_phase: stay in this phase, alive: a beat every 50 ms."""
        end = time.monotonic() + self._slow_s
        while time.monotonic() < end:
            time.sleep(min(0.05, max(0.0, end - time.monotonic())))
            self.beat()


class PeerWatch:
    """What a waiting process knows of its peer: its phase, the age of its heartbeat, its progress."""

    def __init__(self, control: ControlBlock, me: Heartbeat, peer_pid: int, bounds: StallBounds,
                 clock: Callable[[], int] = time.monotonic_ns, report: Callable[[str], None] | None = None) -> None:
        self.me = me
        self.peer = COLLECTOR if me.side == LEARNER else LEARNER
        self.peer_pid = peer_pid
        self.bounds = bounds
        self.peer_stalled = False
        self._names = PHASES[self.peer]
        self._phase_slot, self._beat_slot, self._steady_slot = _SLOTS[self.peer]
        self._c = control.counters.numpy()
        self._clock = clock
        self._created = clock()  # a peer that never beat yet is judged from here
        self._report = report or _to_stderr
        self._wait_start = self._created
        self._next_report = math.inf
        self._said_silent = False  # a peer silent in a steady phase is named once, until it beats again

    # -- reading the peer -----------------------------------------------------------------------
    def peer_phase(self) -> str:
        return self._names[int(self._c[self._phase_slot])]

    def heartbeat_age_s(self, now: int | None = None) -> float:
        now = self._clock() if now is None else now
        beat = int(self._c[self._beat_slot]) or self._created
        return max(0.0, (now - beat) / 1e9)

    def bound_s(self, phase: str) -> float:
        """How long the peer may go without a beat in `phase`."""
        if phase in DONE_PHASES:
            return math.inf
        if phase in LONG_PHASES:
            return self.bounds.long_s
        measured = int(self._c[self._steady_slot]) / 1e6 * self.bounds.iteration_multiple
        factor = self.bounds.peer_factor if self.peer == LEARNER else 1.0
        return max(self.bounds.steady_s, measured) * factor

    def progress(self) -> str:
        if self.peer == COLLECTOR:
            return f"{int(self._c[TICKS_WRITTEN])} ticks written"
        return f"{int(self._c[WEIGHTS_VERSION])} iterations published"

    def stall(self, now: int | None = None) -> str | None:
        """None while the peer beats within its bound, else why it counts as stalled."""
        phase = self.peer_phase()
        age, bound = self.heartbeat_age_s(now), self.bound_s(phase)
        if age <= bound:
            return None
        # the bound to a tenth, as the age (a measured bound such as 5.6 s must not read as 6 beside 5.7)
        shown = f"{bound:.1f}".removesuffix(".0")
        return (f"the {self.peer} (pid {self.peer_pid}) made no progress for {age:.1f} s in phase '{phase}' "
                f"(bound {shown} s: {self.bounds.key(phase)}); last progress: {self.progress()}")

    # -- wait_until's hooks -----------------------------------------------------------------------
    def enter(self) -> None:
        """A wait begins: this process is now waiting (and says so)."""
        self.me.phase(WAITING[self.me.side])
        self._wait_start = self._clock()
        self._next_report = self._wait_start + int(self.bounds.report_every_s * 1e9)

    def poll(self, what: str) -> None:
        self.me.beat()
        now = self._clock()
        why = self.stall(now)
        if why is not None:
            self.peer_stalled = True
            raise PeerStalled(f"{why} while {what}")
        if now >= self._next_report:
            self._next_report = now + int(self.bounds.report_every_s * 1e9)
            phase, age = self.peer_phase(), self.heartbeat_age_s(now)
            # `what` is written for errors ("... while the learner waited for ..."); here it is going on
            awaits = what.replace(" waited ", " waits ", 1)
            so_far = f"duorl: {awaits}, {(now - self._wait_start) / 1e9:.0f} s so far (pid {os.getpid()})"
            if self._silent(phase, age):
                # not waiting (a waiting process beats): frozen, said once, before the stall ends it
                if not self._said_silent:
                    self._said_silent = True
                    self._report(f"{so_far}: the {self.peer} (pid {self.peer_pid}) stopped beating {age:.1f} s ago in "
                                 f"phase '{phase}': it is frozen or stopped, and is ended at its stall bound "
                                 f"({self.bound_s(phase):.0f} s) unless it beats again; {self.progress()}")
                return
            self._said_silent = False
            self._report(
                f"{so_far}: the {self.peer} (pid {self.peer_pid}) is in phase '{phase}', last heartbeat "
                f"{age:.1f} s ago (stall bound {self.bound_s(phase):.0f} s), {self.progress()}"
            )

    def _silent(self, phase: str, age: float) -> bool:
        """The peer has not beaten for a whole report interval in a phase where it beats all the time (a
        steady or waiting phase; the long phases may go minutes without a beat)."""
        return phase not in LONG_PHASES and phase not in DONE_PHASES and age >= 0.9 * self.bounds.report_every_s


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
