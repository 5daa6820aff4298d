"""How duorl runs a task package's own code before a run starts (envs/task_sources.py): its import guarded
against ending duorl, its factory named on stderr while it runs long.

- Importing a task module must not end duorl: a module that calls `sys.exit` or `os._exit` at import (a
  script turned into a module), or parses the command line (argparse on duorl's own arguments), is the
  task's fault, refused as such (`ExitAtImport`, exit 2 through the caller's ConfigError). While the module
  imports, `sys.argv` holds only the module's name (duorl's arguments are not the module's), `os._exit` from
  the importing thread raises instead of ending the process (another thread's, e.g. a parent-death watchdog,
  still exits), and what the module writes on stderr is held back: it is written out after a good import,
  and its last line is quoted in the refusal after an exit.
- `call_waiting(fn, ...)`: a call that says, after WAIT_REPORT_S seconds and every WAIT_REPEAT_S after
  that, what duorl waits on ("duorl: waiting for task factory pkg.mod:make (5 s)"). A Ctrl-C meanwhile is
  the entry layer's to act on (cli/early_stop.py stops at once before the run directory exists).
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import sys
import threading
import time
from types import ModuleType
from typing import Any, Callable, Iterator, TypeVar

T = TypeVar("T")
WAIT_REPORT_S = 5.0
WAIT_REPEAT_S = 15.0


class ExitAtImport(Exception):
    """A module tried to end the process while it was imported: how (`sys.exit(3)`), and the last line it
    wrote on stderr before (argparse's error, say), or ''."""

    def __init__(self, how: str, said: str) -> None:
        super().__init__(how)
        self.how, self.said = how, said


class _OsExit(BaseException):
    def __init__(self, code: Any) -> None:
        super().__init__(code)
        self.code = code


@contextlib.contextmanager
def _exits_refused(module_name: str) -> Iterator[io.StringIO]:
    """sys.argv, os._exit and sys.stderr as the module docstring says, for the duration."""
    importing = threading.get_ident()
    real_exit, real_argv, real_stderr = os._exit, sys.argv, sys.stderr
    held = io.StringIO()

    def refuse_exit(code: int) -> None:
        if threading.get_ident() != importing:
            real_exit(code)  # does not return (but for a stand-in)
            return
        raise _OsExit(code)

    os._exit = refuse_exit  # type: ignore[assignment]
    sys.argv = [module_name]
    sys.stderr = held
    try:
        yield held
    finally:
        os._exit = real_exit
        sys.argv = real_argv
        sys.stderr = real_stderr


def import_task_module(module_name: str) -> ModuleType:
    """`importlib.import_module(module_name)`, guarded (module docstring). ExitAtImport where the module
    tried to end the process; its other errors propagate as they are."""
    if module_name in sys.modules:
        return sys.modules[module_name]
    how: str | None = None
    with _exits_refused(module_name) as held:
        try:
            module = importlib.import_module(module_name)
        except SystemExit as e:
            how = f"sys.exit({e.code!r})"
        except _OsExit as e:
            how = f"os._exit({e.code!r})"
    said = held.getvalue()
    if how is not None:
        sys.modules.pop(module_name, None)
        lines = [line.strip() for line in said.splitlines() if line.strip()]
        raise ExitAtImport(how, lines[-1] if lines else "")
    if said:
        sys.stderr.write(said)
    return module


def call_waiting(fn: Callable[..., T], *args: Any, what: str) -> T:
    """`fn(*args)` in this thread, naming `what` on stderr while it runs long (module docstring)."""
    done = threading.Event()
    t0 = time.monotonic()

    def report() -> None:
        wait = WAIT_REPORT_S
        while not done.wait(wait):
            print(f"duorl: waiting for {what} ({time.monotonic() - t0:.0f} s)", file=sys.stderr, flush=True)
            wait = WAIT_REPEAT_S

    reporter = threading.Thread(target=report, name="duorl-wait-report", daemon=True)
    reporter.start()
    try:
        return fn(*args)
    finally:
        done.set()
