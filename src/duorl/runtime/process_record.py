"""Which process wrote a run summary, recorded so that a later duorl command can tell whether it still
lives (issue #39): a summary that says `starting` or `running` while its process is gone was left by a
run killed at once (kill -9 of every process, a lost host), with nobody left to write its outcome.

A pid alone is not enough: pids are reused, and a reboot starts them again. The record holds the
process's start time (clock ticks since boot, /proc/PID/stat) and the boot's id, so a reused pid or a
rebooted host reads as gone. A process on another host cannot be checked from here (None). Stdlib only.
"""

from __future__ import annotations

import os
import platform
from typing import Any

_BOOT_ID = "/proc/sys/kernel/random/boot_id"


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/PID/stat after the command name (which may hold spaces and parentheses), None if gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _start_ticks(pid: int) -> int | None:
    fields = _stat_fields(pid)
    return int(fields[19]) if fields is not None and len(fields) > 19 else None  # field 22: starttime


def _boot_id() -> str | None:
    try:
        with open(_BOOT_ID, encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return None


def this_process() -> dict[str, Any]:
    """The record of this process: pid, host, start time and boot id (None where the OS has none)."""
    pid = os.getpid()
    return {"pid": pid, "host": platform.node(), "start_ticks": _start_ticks(pid), "boot_id": _boot_id()}


def is_alive(record: Any) -> bool | None:
    """Whether the recorded process still runs: True (a stopped one, SIGSTOP, counts), False (gone, a
    zombie, its pid reused, the host rebooted), None (no usable record, or another host's process)."""
    if not isinstance(record, dict) or not isinstance(record.get("pid"), int):
        return None
    if record.get("host") != platform.node():
        return None
    boot = _boot_id()
    if record.get("boot_id") and boot and record["boot_id"] != boot:
        return False
    pid = record["pid"]
    fields = _stat_fields(pid)
    if fields is None:
        if os.path.isdir("/proc/self"):
            return False
        try:  # no /proc (not Linux): the signal test, which cannot tell a reused pid
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    if fields[0] in ("Z", "X"):  # dead, not yet reaped by its parent
        return False
    started = record.get("start_ticks")
    return not (isinstance(started, int) and len(fields) > 19 and int(fields[19]) != started)


def describe(record: dict[str, Any]) -> str:
    return f"pid {record.get('pid')} on {record.get('host')}"


__all__ = ["describe", "is_alive", "this_process"]
