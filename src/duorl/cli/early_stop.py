"""A stop before the run directory exists ends `duorl train` at once (docs/exit_codes.md): while the
configuration loads and the task's checks run (a task factory may take a minute), the first SIGINT or
SIGTERM abandons the work in progress, through the stop request's interruptible phase
(runtime/stop_signals.py), instead of waiting for its end. Nothing was written: exit 0."""

from __future__ import annotations

import contextlib
import sys
from typing import Iterator

from duorl.runtime.stop_signals import STOPPED_BEFORE_START  # stdlib only

PHASE = "checking the run's inputs"
STOPPED = f"duorl: {STOPPED_BEFORE_START}"


class StoppedEarly(Exception):
    """A stop arrived during the checks; the command says so and exits 0."""


@contextlib.contextmanager
def stops_at_once() -> Iterator[None]:
    """For the duration, a stop signal abandons the work at once (StoppedEarly once it reaches here)."""
    from duorl.runtime.stop_signals import STOP_REQUEST

    if not STOP_REQUEST.listening:  # no handler of duorl's (a test calling main()): nothing to interrupt
        yield
        return
    try:
        with STOP_REQUEST.phases(lambda: PHASE):
            if STOP_REQUEST():  # a signal that came before this point
                raise StoppedEarly()
            yield
    except StoppedEarly:
        raise
    except BaseException as e:
        # the handler raised it, importing runtime.control (torch) then: checking costs nothing before
        if "duorl.runtime.control" in sys.modules:
            from duorl.runtime.control import PhaseInterrupted

            if isinstance(e, PhaseInterrupted):
                raise StoppedEarly() from e
        # a library that catches the interruption and fails on its half-built state instead (OmegaConf, hit
        # while it builds a node, raises an AttributeError): after a stop, whatever the work raised is its doing
        if STOP_REQUEST() and not isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise StoppedEarly() from e
        raise


def say_stopped() -> int:
    print(STOPPED, file=sys.stderr, flush=True)
    return 0
