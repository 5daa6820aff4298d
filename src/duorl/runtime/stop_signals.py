"""The one stop request of a process: SIGINT and SIGTERM from the first instruction of `duorl train` to
its last (docs/exit_codes.md).

`STOP_REQUEST` records the first SIGINT or SIGTERM; the run stops at its next safe point (before the run
directory exists: at once, nothing written; later: the duo's next wait or iteration boundary, with a
final checkpoint) and exits 0. What a later signal means depends on where the process is, and the
layers that know say so through the same object instead of installing handlers of their own:
- `escalate`: a second SIGINT stops at once (KeyboardInterrupt), except in a data-parallel rank,
  where the second one is the launcher passing the first on;
- `interruptible`: the duo's loop names its current phase when a signal must not wait for that
  phase's end (a compile or capture can outlast the 30 s a signalled run has); the signal then
  abandons it at once (PhaseInterrupted).

The CLI starts listening before anything slow (`python -m duorl`, the `duorl` script, a rank from
its first import of duorl); the duo's loop listens too when it runs without the CLI (tests).
Stdlib only at import: it is armed before torch is imported.
"""

from __future__ import annotations

import contextlib
import os
import signal
from typing import Any, Callable, Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM)
# what a command says when a stop came before its run directory existed (docs/exit_codes.md): the one
# wording of `duorl train`, its ranks and the data-parallel launcher (cli/early_stop.py STOPPED)
STOPPED_BEFORE_START = "stopped before the run started (nothing was written)"


class StopRequest:
    """Whether (and by which signal) this process was asked to stop, and what a signal does now."""

    def __init__(self) -> None:
        self.signal: int | None = None
        self.escalate = True
        # the current phase when a signal must abandon it at once, else None (set by the duo's loop)
        self.interruptible: Callable[[], str | None] = lambda: None
        self._depth = 0  # nested listen() calls: only the outermost installs and restores
        self._old: dict[int, Any] = {}

    # -- what the layers ask ------------------------------------------------------------------
    @property
    def listening(self) -> bool:
        return self._depth > 0

    def __call__(self) -> bool:
        return self.signal is not None

    def stops_at_once(self, signum: int) -> bool:
        """A SIGINT while a stop is pending means "now", unless escalation is off."""
        return self.signal is not None and signum == signal.SIGINT and self.escalate

    # -- the handler ----------------------------------------------------------------------------
    def handle(self, signum: int, frame: Any) -> None:
        if self.stops_at_once(signum):
            raise KeyboardInterrupt
        first = self.signal is None
        self.signal = signum
        if first:
            # os.write: a print() here could re-enter a print the signal interrupted
            again = " (Ctrl-C again: at once)" if self.escalate else ""
            os.write(2, f"duorl: {signal.Signals(signum).name}: stopping at the next safe point{again}\n".encode())
        phase = self.interruptible()
        if phase is not None:
            from duorl.runtime.control import PhaseInterrupted

            raise PhaseInterrupted(signum, phase)

    @contextlib.contextmanager
    def listen(self, escalate: bool | None = None) -> Iterator["StopRequest"]:
        """Handle SIGINT/SIGTERM for the duration (the main thread only; elsewhere nothing changes).
        The outermost listen restores the previous handlers and forgets the request at its end (a
        test may run several commands in one process)."""
        previous_escalate = self.escalate
        if escalate is not None:
            self.escalate = escalate
        if self._depth == 0:
            self.signal = None
            self._old = _install(self.handle)
        self._depth += 1
        try:
            yield self
        finally:
            self._depth -= 1
            self.escalate = previous_escalate
            if self._depth == 0:
                _restore(self._old)
                self._old = {}
                self.signal, self.escalate = None, True

    def listen_for_good(self, escalate: bool) -> None:
        """Listen until the process ends (a rank or the `duorl` command: armed at its first instruction)."""
        self.escalate = escalate
        if self._depth == 0:
            self._old = _install(self.handle)
        self._depth += 1

    @contextlib.contextmanager
    def phases(self, interruptible: Callable[[], str | None]) -> Iterator[None]:
        """While the duo's loop runs: which of its phases a signal abandons at once."""
        old = self.interruptible
        self.interruptible = interruptible
        try:
            yield
        finally:
            self.interruptible = old


def _install(handler: Callable[[int, Any], None]) -> dict[int, Any]:
    old: dict[int, Any] = {}
    for sig in SIGNALS:
        try:
            old[sig] = signal.signal(sig, handler)
        except ValueError:  # not the main thread
            pass
    return old


def _restore(old: dict[int, Any]) -> None:
    for sig, handler in old.items():
        signal.signal(sig, handler)


STOP_REQUEST = StopRequest()


def early_stop_signal() -> int | None:
    """The signal that asked this process to stop (None: none yet)."""
    return STOP_REQUEST.signal


def stop_signals(escalate: bool = True) -> contextlib.AbstractContextManager[StopRequest]:
    """`STOP_REQUEST.listen(escalate)`: what `duorl train` runs in."""
    return STOP_REQUEST.listen(escalate)
