"""Phase timers that add no host sync inside the measured work.

On CUDA each phase records a pair of events and the elapsed times are read once, after the
iteration's own sync; on the CPU the work is synchronous and perf_counter is exact.
"""

from __future__ import annotations

import time
from collections import defaultdict
from contextlib import contextmanager
from typing import Iterator

import torch


class PhaseTimer:
    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self._events: dict[str, list[tuple[torch.cuda.Event, torch.cuda.Event]]] = defaultdict(list)
        self._cpu_ms: dict[str, float] = defaultdict(float)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            yield
            end.record()
            self._events[name].append((start, end))
        else:
            t0 = time.perf_counter()
            yield
            self._cpu_ms[name] += (time.perf_counter() - t0) * 1e3

    def add_host_ms(self, name: str, ms: float) -> None:
        self._cpu_ms[name] += ms

    def take(self) -> "PhaseTimes":
        """The phases since the last take, to be read once their work is done (`PhaseTimes.ms`)."""
        taken = PhaseTimes(dict(self._events), dict(self._cpu_ms))
        self._events.clear()
        self._cpu_ms.clear()
        return taken

    def collect(self) -> dict[str, float]:
        """Milliseconds per phase since the last collect (call after the work is synchronised)."""
        return self.take().ms()


class PhaseTimes:
    """Phases taken from a PhaseTimer: their events (CUDA) and host milliseconds."""

    def __init__(self, events: dict[str, list[tuple[torch.cuda.Event, torch.cuda.Event]]],
                 cpu_ms: dict[str, float]) -> None:
        self.events, self.cpu_ms = events, cpu_ms

    def ms(self) -> dict[str, float]:
        """Milliseconds per phase; the events must be done (after a sync, or after an event recorded later)."""
        out = dict(self.cpu_ms)
        for name, pairs in self.events.items():
            out[name] = out.get(name, 0.0) + sum(s.elapsed_time(e) for s, e in pairs)
        return out


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.current_stream(device).synchronize()
