"""What an existing run directory holds, as a later duorl command finds it (issue #39): a run that
ended (its outcome recorded), one still going (its process alive, a stopped one too), or one that
died without an outcome: its summary still says `starting` or `running` and the process that wrote it
is gone (kill -9 of every process, a lost host). The last is said on the console and recorded in its
summary (`failed`, `failed_part: every process`, `cause_known: false`) by whoever finds it first; a
run killed before it started (still `starting`, no checkpoint) leaves a directory that may be reused.
"""

from __future__ import annotations

import datetime as _dt
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from duorl.runtime.process_record import describe, is_alive

SUMMARY = "run_summary.json"
OPEN = ("starting", "running")  # what a summary says before the run's outcome (runtime/outcome.py)
KILLED_PART = "every process"


@dataclass(frozen=True)
class EarlierRun:
    path: Path
    summary: dict[str, Any]
    alive: bool | None  # the recorded process: None without a record, or on another host

    @property
    def status(self) -> str | None:
        return self.summary.get("status")

    @property
    def is_open(self) -> bool:
        return self.status in OPEN

    @property
    def dead(self) -> bool:
        """Open, and its process is gone: nobody will write its outcome."""
        return self.is_open and self.alive is False

    @property
    def never_started(self) -> bool:
        """Killed before its first iteration: nothing of it is worth keeping."""
        return self.dead and self.status == "starting" and not _has_checkpoint(self.path)

    @property
    def running_elsewhere(self) -> bool:
        """Open, with its process on another host (or unrecorded): it cannot be checked from here."""
        return self.is_open and self.alive is None

    def who(self) -> str:
        rec = self.summary.get("process")
        return describe(rec) if isinstance(rec, dict) else "its process (not recorded)"

    def progress(self) -> str:
        it, last = self.summary.get("iterations", 0), self.summary.get("last_checkpoint")
        return f"iteration {it}, last checkpoint {last}" if last else f"iteration {it}, no checkpoint"


def _has_checkpoint(path: Path) -> bool:
    ckpt = path / "checkpoints"
    return (ckpt / "latest.json").is_file() or any(ckpt.glob("*.pt"))


def earlier_run(path: Path) -> EarlierRun | None:
    """The run whose summary is in `path`, None if there is none (or it cannot be read)."""
    try:
        summary = json.loads((Path(path) / SUMMARY).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(summary, dict):
        return None
    return EarlierRun(Path(path), summary, is_alive(summary.get("process")))


def dead_run_message(run: EarlierRun) -> str:
    """What happened to a dead run, in words (the console's line and the summary's error)."""
    if run.status == "starting":
        what = "was killed before it started (its summary still said 'starting'; nothing was trained)"
    else:
        what = f"died without an outcome while 'running' ({run.progress()})"
    return (f"the run in {run.path} ({run.who()}) {what}: its processes are gone, killed at once (kill -9, "
            "a lost host) with nobody left to record why")


def record_dead(run: EarlierRun, found_by: str) -> str:
    """Record in the dead run's summary that it failed (the cause unknown: a launcher or a collector
    that knows better may still replace it); returns the message. A summary that cannot be written
    (a read-only copy) keeps what it said: the message is on the console anyway."""
    from duorl.runtime.atomic_files import write_json

    message = dead_run_message(run)
    summary = dict(run.summary, status="failed", error=message, failed_part=KILLED_PART, cause_known=False,
                   found_dead={"by": found_by, "at": _dt.datetime.now().isoformat(timespec="seconds")})
    try:
        write_json(run.path / SUMMARY, summary, "run summary")
    except OSError:
        pass
    return message


def run_dir_of(path: Path) -> Path | None:
    """The run directory a resume path names: the directory, its checkpoints/ folder, or a checkpoint file
    in it; None if no run summary is there (a checkpoint copied elsewhere)."""
    p = Path(path)
    candidates = [p.parent, p.parent.parent] if p.is_file() else [p, p.parent] if p.name == "checkpoints" else [p]
    return next((c for c in candidates if (c / SUMMARY).is_file()), None)


__all__ = ["EarlierRun", "dead_run_message", "earlier_run", "record_dead", "run_dir_of"]
