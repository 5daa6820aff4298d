"""No orphans: a duorl process started by another one ends when its parent dies, whatever killed it.

Linux's parent-death signal (`prctl(PR_SET_PDEATHSIG)`) makes the kernel signal a process when its
parent dies, even by SIGKILL. It must be armed before the parent can die unnoticed, so a parent that
starts a duorl child names itself in the child's environment (`DUORL_PARENT_PID=PID:SIGNAL`, set only
for that start), and the child arms the signal on its first import of `duorl` (duorl/__init__.py:
before torch, before the child's own code is even unpickled). A parent that died before the arming
is caught right after it: the child's parent is then no longer that PID, and it leaves at once.

Who gets which signal:
- a data-parallel rank (child of the launcher or of a torchrun agent): SIGKILL, there is nothing a
  rank could save once the process that watches every rank is gone; under torchrun, which sets no
  DUORL_PARENT_PID, the rank arms against the parent it finds (the agent);
- a collector (child of its learner): SIGKILL until its own code runs, then SIGTERM, which its
  handler tells apart from a launcher's stop request: the learner gone, the collector records the
  run as failed (the learner can no longer) and leaves (runtime/collector.py).

The same first instruction starts listening for SIGINT and SIGTERM, so that a stop in the child's
first second is a stop request, not a traceback (runtime/stop_signals.py).

Stdlib only: it runs before anything heavy is imported.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
from typing import Any, Iterator

PARENT_ENV = "DUORL_PARENT_PID"
_PR_SET_PDEATHSIG = 1
# the exit code of a child whose parent was gone before it could arm (nothing of it ran yet)
ORPHANED_AT_START = 1


def set_parent_death_signal(sig: int) -> bool:
    """Ask the kernel to send `sig` to this process when its parent dies (Linux; elsewhere False)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


RANK, COLLECTOR = "rank", "collector"
# a SIGTERM that reached a collector before its own handler existed (collector_main reads it)
early_sigterm = False


def parent_entry(parent_pid: int, role: str) -> str:
    """The DUORL_PARENT_PID value a parent gives a child it starts (`role`: RANK or COLLECTOR)."""
    return f"{parent_pid}:{role}"


@contextlib.contextmanager
def naming_parent(role: str) -> Iterator[None]:
    """Around starting a child (a spawn copies the environment then): it arms against this process."""
    old = os.environ.get(PARENT_ENV)
    os.environ[PARENT_ENV] = parent_entry(os.getpid(), role)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(PARENT_ENV, None)
        else:
            os.environ[PARENT_ENV] = old


@contextlib.contextmanager
def stop_signals_held_for_children() -> Iterator[None]:
    """SIGINT and SIGTERM blocked in this (main) thread while it starts children (ranks, collectors): a
    child inherits the blocked mask through exec, so a stop that reaches it while the interpreter starts
    stays pending (never a KeyboardInterrupt from inside Python's start-up, never lost) until duorl's
    first lines listen and unblock them (duorl/__init__.py; a collector then ignores SIGINT, its learner
    owns the stop). This process still takes the signals: a keeper thread, started before the block,
    receives them and Python runs the handlers in the main thread. Ignoring them instead for the start
    (the child inherits SIG_IGN too) lost this process's own stop when one came meanwhile: a Ctrl-C in
    the first second of `duorl train`, which starts its collector first thing, did nothing."""
    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        yield
        return
    done = threading.Event()
    threading.Thread(target=done.wait, name="duorl-signal-keeper", daemon=True).start()
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
        done.set()


@contextlib.contextmanager
def starting_collector() -> Iterator[None]:
    """Around a collector's spawn (runtime/duo.py, runtime/prestart.py): it arms against this process and
    starts with SIGINT and SIGTERM held (stop_signals_held_for_children). multiprocessing's resource
    tracker is started before the hold: its own first start unblocks both signals in this thread once it
    has spawned the tracker, which left the collector they were held for with none held."""
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()
    with naming_parent(COLLECTOR), stop_signals_held_for_children():
        yield


def _record_sigterm(signum: int, frame: object) -> None:
    global early_sigterm
    early_sigterm = True


def _listen_early(role: str, early: list[int]) -> None:
    """Signals from the child's first instruction: a collector ignores SIGINT (Ctrl-C reaches the whole
    process group; its learner owns the stop) and keeps a SIGTERM for its handler; a rank records both
    as its stop request (a second SIGINT is the launcher passing the first on). `early`: the signals
    duorl/__init__.py recorded before these handlers existed, handled now in their order."""
    if role == COLLECTOR:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, _record_sigterm)
        for signum in early:
            if signum == signal.SIGTERM:
                _record_sigterm(signum, None)
        return
    from duorl.runtime.stop_signals import STOP_REQUEST

    STOP_REQUEST.listen_for_good(escalate=False)
    for signum in early:
        STOP_REQUEST.handle(signum, None)


def _previous_handlers(early: list[int], before: dict[int, Any]) -> None:
    """Nobody listens in this process: the handlers from before duorl's first lines back, and a signal
    recorded meanwhile delivered again to them."""
    for signum, handler in before.items():
        signal.signal(signum, handler)
    for signum in early:
        if before.get(signum) is not signal.SIG_IGN:
            os.kill(os.getpid(), signum)


def arm(parent_pid: int, sig: int) -> None:
    """Die with `parent_pid`: the parent-death signal, then the check for a parent already gone."""
    set_parent_death_signal(sig)
    if os.getppid() != parent_pid:
        os.write(2, f"duorl: the parent process (pid {parent_pid}) is gone before this one (pid {os.getpid()}) "
                    f"started: leaving at once\n".encode())
        os._exit(ORPHANED_AT_START)


def arm_from_environment(early: list[int] | None = None, before: dict[int, Any] | None = None) -> None:
    """Called on the first import of duorl: arm against the parent named in DUORL_PARENT_PID (the entry
    is consumed, so that a grandchild never arms against its grandparent), else, in a torchrun
    worker, against the agent that started it. `early`: the signals recorded before this call (duorl's
    first lines listen with a recorder, `before` holds the handlers they replaced): the process's own
    handlers take them over."""
    from duorl.runtime.whole_lines import whole_lines

    whole_lines()  # a child's lines and its parent's (or another rank's) share one stderr: never mid-line
    early = early if early is not None else []
    before = before if before is not None else {}
    entry = os.environ.pop(PARENT_ENV, None)
    if entry:
        pid, _, role = entry.partition(":")
        try:
            parent = int(pid)
        except ValueError:
            _previous_handlers(early, before)
            return  # a malformed entry arms nothing (never a reason to fail)
        _listen_early(role, early)
        # SIGKILL at first, for a collector too: until its handler runs, nothing of it needs saving
        arm(parent, signal.SIGKILL)
        return
    if "TORCHELASTIC_RUN_ID" in os.environ and "RANK" in os.environ and "LOCAL_RANK" in os.environ:
        # torchrun names no parent; its agent is this process's parent now (a parent that died in the
        # few milliseconds before this line cannot be told apart from init: the agent is rarely killed then)
        _listen_early(RANK, early)
        set_parent_death_signal(signal.SIGKILL)
        return
    _previous_handlers(early, before)
