"""SIGINT and SIGTERM from the start of `duorl train` (docs/exit_codes.md).

Installed before anything slow happens (imports, config, building), so a Ctrl-C in the first seconds
is a stop request like any other, not a KeyboardInterrupt traceback: the first SIGINT or SIGTERM is
recorded, the run stops at its next safe point (before the run directory exists: at once, nothing
written; later: the duo's first wait or iteration boundary, with a final checkpoint) and exits 0. A
second SIGINT stops at once (KeyboardInterrupt), except in a data-parallel rank, where the second one
is the launcher passing the first on. The duo's loop installs its own handler (runtime/duo.py
_StopFlag), which starts from the request recorded here and shares the rule and the installing.
"""

from __future__ import annotations

import contextlib
import os
import signal
from typing import Any, Callable, Iterator

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_requested: int | None = None
_escalate = True


def early_stop_signal() -> int | None:
    """The signal that asked this process to stop before the duo's loop took over (None: none)."""
    return _requested


def stops_at_once(pending: int | None, signum: int, escalate: bool) -> bool:
    """The escalation rule of both layers: a SIGINT while a stop is pending means "now", unless
    `escalate` is off (a data-parallel rank, whose second SIGINT is the launcher passing one on)."""
    return pending is not None and signum == signal.SIGINT and escalate


def install(handler: Callable[[int, Any], None]) -> dict[int, Any]:
    """`handler` for SIGINT and SIGTERM (the main thread only; elsewhere nothing changes); the handlers
    it replaced, for `restore`."""
    old: dict[int, Any] = {}
    for sig in _SIGNALS:
        try:
            old[sig] = signal.signal(sig, handler)
        except ValueError:  # not the main thread
            pass
    return old


def restore(old: dict[int, Any]) -> None:
    for sig, handler in old.items():
        signal.signal(sig, handler)


def _handle(signum: int, frame: Any) -> None:
    global _requested
    if stops_at_once(_requested, signum, _escalate):
        raise KeyboardInterrupt
    first = _requested is None
    _requested = signum
    if first:
        # os.write: a print() here could re-enter a print the signal interrupted
        name = signal.Signals(signum).name
        again = " (Ctrl-C again: at once)" if _escalate else ""
        os.write(2, f"duorl: {name}: stopping at the next safe point{again}\n".encode())


@contextlib.contextmanager
def stop_signals(escalate: bool = True) -> Iterator[None]:
    """Record SIGINT/SIGTERM for the duration (the main thread only; elsewhere nothing changes), then
    restore the previous handlers and forget the request (a test may run several commands)."""
    global _requested, _escalate
    _requested, _escalate = None, escalate
    old = install(_handle)
    try:
        yield
    finally:
        restore(old)
        _requested, _escalate = None, True
