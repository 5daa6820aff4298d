"""The start-up timeline of one duorl process: each phase before the run's first iteration, with its seconds.

A run's start crosses two processes (the learner and its spawned collector) and several layers (the entry
layer's checks, the runtime's spawn and captures, the envs' Warp module loads), so each process keeps one
timeline, `PHASES`, which any layer may write: this module imports only the standard library and sits at
the bottom of the stack (docs/design.md §1). Times are wall-clock seconds (`time.time()`: one clock for
every process of a host), counted from the process's start as the kernel recorded it (Linux /proc), so the
first phase covers the interpreter and its imports too.

Counters (`add_counter`: torch.compile's cumulative seconds, Warp's module loads) are read when a phase
starts and ends, and the phase keeps what they gained in between: the seconds of a first tick split into
compiling and the rest without a profiler. Only host clocks are read: nothing here waits for a device, so
a phase around GPU work measures its host side (what start-up waits for: compiling, capturing, loading).
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

_IMPORTED_AT = time.time()


def process_start_time(pid: int | None = None) -> float:
    """When process `pid` (this one by default) started, in time.time() seconds: the kernel's start time
    (/proc/PID/stat, clock ticks since boot on the boot clock) read against CLOCK_BOOTTIME, so 10 ms
    resolution; where that is unavailable (not Linux), when this module was imported."""
    try:
        with open(f"/proc/{pid or os.getpid()}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        started_after_boot = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22 of stat(5)
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - started_after_boot
        return time.time() - age
    except (OSError, ValueError, IndexError, AttributeError):
        return _IMPORTED_AT


@dataclass
class Phase:
    """One step of start-up: its name, its start (time.time() seconds), its length, and what the counters
    gained during it (e.g. {"torch.compile_s": 30.1, "warp_compiled": 35})."""

    name: str
    start: float
    seconds: float
    detail: dict[str, float] = field(default_factory=dict)

    def record(self, origin: float) -> dict[str, Any]:
        return {"name": self.name, "start_s": round(self.start - origin, 3), "seconds": round(self.seconds, 3),
                **{k: round(v, 3) if isinstance(v, float) else v for k, v in self.detail.items()}}


Counter = Callable[[], dict[str, float]]


class StartupTimeline:
    """This process's start-up phases, in the order they ended."""

    def __init__(self, origin: float | None = None) -> None:
        self.origin = process_start_time() if origin is None else origin
        self.phases: list[Phase] = []
        self._counters: dict[str, Counter] = {}
        self._open: list[Phase] = []  # the phases whose blocks are running, innermost last

    def add_counter(self, name: str, read: Counter) -> None:
        """Register a cumulative counter (read on the host, cheaply, without waiting for a device); a
        phase records the gain of each of its keys. Registering a name again replaces it."""
        self._counters[name] = read

    def _read(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for read in self._counters.values():
            try:
                out.update(read())
            except Exception:  # noqa: BLE001 - a counter never breaks a run's start
                pass
        return out

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[Phase]:
        """Time the block as phase `name` (recorded when the block ends, also by an exception)."""
        before, start = self._read(), time.time()
        p = Phase(name, start, 0.0)
        self._open.append(p)
        try:
            yield p
        finally:
            self._open.remove(p)
            p.seconds = time.time() - start
            p.detail.update(_gains(before, self._read()))
            self.phases.append(p)

    @contextlib.contextmanager
    def part(self, name: str) -> Iterator[None]:
        """Time the block as a part of the innermost running phase: its seconds go into that phase's detail
        as `<name>_s` (summed if the part repeats), so a phase says where its time went without a phase of
        its own per step. Outside any phase, nothing is recorded."""
        start = time.time()
        try:
            yield
        finally:
            if self._open:
                detail = self._open[-1].detail
                detail[f"{name}_s"] = detail.get(f"{name}_s", 0.0) + time.time() - start

    def add(self, name: str, start: float, end: float | None = None, **detail: float) -> Phase:
        """A phase whose start is known from elsewhere (e.g. the process start), ending now or at `end`."""
        p = Phase(name, start, (time.time() if end is None else end) - start, dict(detail))
        self.phases.append(p)
        return p

    def add_since_last(self, name: str) -> Phase:
        """A phase from the end of the last one (the process start if none) to now."""
        last = self.phases[-1] if self.phases else None
        return self.add(name, last.start + last.seconds if last is not None else self.origin)

    def mark(self, name: str, **detail: float) -> Phase:
        """A moment (a phase of no length): e.g. the first update done."""
        return self.add(name, time.time(), **detail)

    def last(self, name: str) -> Phase | None:
        return next((p for p in reversed(self.phases) if p.name == name), None)

    def elapsed(self) -> float:
        """Seconds since this process started."""
        return time.time() - self.origin

    def record(self) -> dict[str, Any]:
        """JSON-ready: the process start (time.time() seconds), each phase (its start counted from there), and
    the counters' totals so far (e.g. every Warp module this process loaded)."""
        totals = {k: round(v, 3) for k, v in self._read().items()}
        return {"pid": os.getpid(), "process_start": self.origin, "phases": [p.record(self.origin) for p in self.phases],
                "totals": totals}


def _gains(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: v - before.get(k, 0.0) for k, v in after.items() if v - before.get(k, 0.0) > 0}


def describe(p: Phase) -> str:
    """'3.1 s' plus what happened inside, where the counters saw it: '3.1 s (torch.compile 2.0 s; warp 35
    modules loaded, 35 compiled)'."""
    d, parts = p.detail, []
    if d.get("torch_compile_s", 0) >= 0.05:
        parts.append(f"torch.compile {d['torch_compile_s']:.1f} s")
    if d.get("warp_modules"):
        parts.append(f"warp {d['warp_modules']:.0f} modules loaded, {d.get('warp_compiled', 0):.0f} compiled")
    if "workers" in d:  # a background preload (envs/backends/warp_preload.py)
        parts.append(f"{d.get('modules', 0):.0f} modules on {d['workers']:.0f} threads, "
                     f"the first step waited {d.get('first_step_waited_s', 0):.1f} s")
    return f"{p.seconds:.1f} s" + (f" ({'; '.join(parts)})" if parts else "")


# this process's timeline: the learner's, or (in the spawned process) the collector's
PHASES = StartupTimeline()


def console_line(what: str, phases: list[Phase], origin: float) -> str:
    """One start-up line: the seconds from `origin` (the command) to the end of the last of `phases`, what
    was reached, and each phase with its seconds."""
    end = max((p.start + p.seconds for p in phases), default=time.time())
    parts = ", ".join(f"{p.name} {describe(p)}" for p in phases)
    return f"duorl: start-up {end - origin:6.1f} s  {what}" + (f": {parts}" if parts else "")


def merged_record(learner: dict[str, Any], collector: dict[str, Any] | None) -> dict[str, Any]:
    """startup.json: both processes' phases on one clock, seconds from the learner's start (the command's,
    for a run without a launcher); each process's own record keeps its pid and start."""
    origin = learner["process_start"]

    def rebased(rec: dict[str, Any]) -> list[dict[str, Any]]:
        shift = rec["process_start"] - origin
        return [{**p, "start_s": round(p["start_s"] + shift, 3), "end_s": round(p["start_s"] + shift + p["seconds"], 3)}
                for p in rec["phases"]]

    out: dict[str, Any] = {"command_start": origin, "learner": rebased(learner), "learner_pid": learner["pid"],
                           "learner_totals": learner.get("totals", {})}
    if collector is not None:
        out["collector"] = rebased(collector)
        out["collector_pid"] = collector["pid"]
        out["collector_totals"] = collector.get("totals", {})
        out["collector_process_start_s"] = round(collector["process_start"] - origin, 3)
    return out
