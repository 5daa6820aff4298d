"""Warp's module loads, counted instead of printed: how many kernel modules a process loaded, how many it
had to compile (not in Warp's kernel cache) and the seconds each took, for the start-up table.

Warp times every module load (`Module.load`, a `ScopedTimer` active at log level INFO) and logs one line
per module: hundreds for MuJoCo Warp. `install()` keeps Warp at INFO and puts a logger in front of Warp's
own that counts those lines and drops Warp's other INFO lines (its start-up banner); warnings and errors
go on to Warp's logger unchanged. `DUORL_WARP_VERBOSE=1` leaves Warp's logging alone (every line shown).
The counts join this process's start-up timeline (duorl/startup_phases.py) as the counter "warp".
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass, field
from typing import Any

from duorl.startup_phases import PHASES

VERBOSE_ENV = "DUORL_WARP_VERBOSE"
# warp/_src/context.py Module.load: "Module NAME [HASH ]load on device 'DEV' took 12.34 ms (compiled|cached)"
_LOAD_LINE = re.compile(r"^\s*Module (\S+) (?:[0-9a-f]+ )?load on device '([^']+)' took ([\d.]+) ms\s*\((\w+)\)")


@dataclass
class ModuleLoads:
    """Every module load seen in this process: (module name, device, seconds, compiled)."""

    loads: list[tuple[str, str, float, bool]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)  # Warp loads modules on worker threads too

    def add(self, name: str, device: str, seconds: float, compiled: bool) -> None:
        with self._lock:
            self.loads.append((name, device, seconds, compiled))

    def counter(self) -> dict[str, float]:
        """The cumulative counts (startup_phases counter "warp")."""
        with self._lock:
            loads = list(self.loads)
        compiled = [s for _, _, s, c in loads if c]
        return {"warp_modules": float(len(loads)), "warp_compiled": float(len(compiled)),
                "warp_compile_s": sum(compiled), "warp_load_s": sum(s for _, _, s, _ in loads)}

    def slowest(self, n: int = 5) -> list[tuple[str, float, bool]]:
        with self._lock:
            loads = sorted(self.loads, key=lambda x: -x[2])[:n]
        return [(name, round(s, 3), c) for name, _, s, c in loads]


LOADS = ModuleLoads()


class _CountingLogger:
    """A Warp Logger (warp.set_logger's protocol) that counts module loads and drops other INFO lines."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def debug(self, message: str) -> None:
        self.inner.debug(message)

    def info(self, message: str) -> None:
        m = _LOAD_LINE.match(message)
        if m:
            LOADS.add(m.group(1), m.group(2), float(m.group(3)) / 1e3, m.group(4) == "compiled")

    def warning(self, message: str, category: Any = None, stacklevel: int = 1) -> None:
        self.inner.warning(message, category=category, stacklevel=stacklevel + 1)

    def error(self, message: str) -> None:
        self.inner.error(message)


def install() -> None:
    """Count Warp's module loads in this process instead of printing them (idempotent); Warp's logging is
    left as it is when DUORL_WARP_VERBOSE is set or someone chose a level other than Warp's default."""
    import warp as wp

    if os.environ.get(VERBOSE_ENV) or wp.config.log_level != wp.LOG_INFO:
        return
    current = wp.get_logger()
    if not isinstance(current, _CountingLogger):
        wp.set_logger(_CountingLogger(current))
    PHASES.add_counter("warp", LOADS.counter)
