"""A run directory is never reused (docs/design.md §8): the path a run will write is checked before anything
is built, and then created atomically (`os.mkdir`, which fails if it exists: never `exist_ok`), so two
runs can never share one and a finished run can never be overwritten."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from duorl.config.errors import ConfigError

KEY = "training.log_dir"
_ALLOWED = "a path that does not exist yet (its parent folders are made), or null (runs/<task>-<algo>-<time>)"
_FIX_NEW = f"pick a new {KEY}, or leave it unset (a fresh runs/<task>-<algo>-<time> is made)"
# the most names tried for a default run directory started in the same second as others
_MAX_SUFFIX = 1000


def _is_run_dir(path: Path) -> bool:
    return any((path / name).is_file() for name in ("run_summary.json", "run_config.json", "checkpoints/latest.json"))


def _earlier(p: Path, value: Any, fix: str) -> ConfigError:
    """The refusal of a directory an earlier run holds, saying what became of that run (issue #39): still
    going, dead without an outcome (recorded now), or ended."""
    from duorl.telemetry.earlier_run import earlier_run, record_dead

    run = earlier_run(p)
    resume = f"continue that run with `duorl resume {p}` or training.resume={p} (a new run directory), or {fix}"
    if run is not None and run.is_open and run.alive:
        return _refuse(value, f"is the directory of a run still going ({run.who()}, status '{run.status}'; a "
                              "stopped process, SIGSTOP, counts as going)",
                       f"let that run end or stop it (Ctrl-C or SIGTERM: it writes a final checkpoint), or {fix}")
    if run is not None and run.dead:
        message = record_dead(run, f"duorl train {KEY}={value}")
        return _refuse(value, f"is the directory of an earlier run that died: {message} (recorded now in its "
                              "run_summary.json: status failed)", resume)
    if run is not None and run.running_elsewhere:
        return _refuse(value, f"is the directory of a run whose summary says '{run.status}' ({run.who()}: it cannot "
                              "be checked from here)", resume)
    return _refuse(value, "is the directory of an earlier run (a run directory is never reused: its checkpoints, "
                          "metrics and summary would be overwritten)", resume)


def _refuse(value: Any, problem: str, fix: str = _FIX_NEW) -> ConfigError:
    return ConfigError(KEY, value, problem, _ALLOWED, fix)


def check_new_run_dir(path: str | os.PathLike[str], default: bool = False) -> None:
    """Refuse (ConfigError naming training.log_dir) a run directory that exists, or that cannot be
    created here. Creates nothing: the folder it would create first is made and removed again to
    learn that it can be (a permission bit says nothing for root, a read-only or virtual file system).
    `default`: the path is the default run directory (the fix is then to set training.log_dir)."""
    fix = f"set {KEY} to a writable place" if default else _FIX_NEW
    try:
        _check_new(Path(path), str(path), fix)
    except OSError as e:  # a name too long, a loop of links, a folder that cannot be read
        raise _refuse(str(path), f"cannot be created ({e.strerror or e})", fix) from None


def _check_new(p: Path, value: Any, fix: str) -> None:
    if p.is_dir():
        from duorl.telemetry.earlier_run import earlier_run

        run = earlier_run(p)
        if run is not None and run.never_started:
            return  # killed before it started: claim_run_dir takes the directory over
        if _is_run_dir(p):
            raise _earlier(p, value, fix)
        raise _refuse(value, "exists (a run directory is never reused)", fix)
    if p.exists() or p.is_symlink():
        raise _refuse(value, "exists and is not a directory", fix)
    missing: list[str] = []
    ancestor = p.absolute()
    while not ancestor.exists():
        missing.append(ancestor.name)
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise _refuse(value, f"cannot be created: {ancestor} is a file", fix)
    try:
        longest = os.pathconf(ancestor, "PC_NAME_MAX")
    except (OSError, ValueError):
        longest = 255
    too_long = [m for m in missing if len(os.fsencode(m)) > longest]
    if too_long:
        raise _refuse(value, f"cannot be created: a folder name is longer than {longest} bytes", fix)
    first = ancestor / missing[-1]
    try:
        os.mkdir(first)
    except OSError as e:
        raise _refuse(value, f"cannot be created in {ancestor} ({e.strerror or e})", fix) from None
    os.rmdir(first)  # it was made by this call just now, and is empty


def claim_run_dir(log_dir: str | None, default: Path) -> Path:
    """Create the run directory atomically: `log_dir`, or `default` (with -2, -3, ... appended when
    another run started in the same second). Raises ConfigError if `log_dir` exists by now."""
    if log_dir:
        path = Path(log_dir)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)  # the parents may be shared; the run dir is not
            os.mkdir(path)
        except FileExistsError:
            if not _take_over(path):
                raise _refuse(log_dir, "exists (another run created it since the run's checks)") from None
            return path
        except OSError as e:
            raise _refuse(log_dir, f"cannot be created ({e.strerror or e})",
                          f"pick a writable place for {KEY}") from None
        write_first_summary(path)
        return path
    for i in range(1, _MAX_SUFFIX + 1):
        path = default if i == 1 else default.with_name(f"{default.name}-{i}")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            os.mkdir(path)
            write_first_summary(path)
            return path
        except FileExistsError:
            continue
        except OSError as e:
            raise _refuse(None, f"the default run directory {path} cannot be created ({e.strerror or e})",
                          f"set {KEY} to a writable place") from None
    raise _refuse(None, f"{_MAX_SUFFIX} run directories named {default}-* exist already", f"set {KEY}",)


def write_first_summary(path: Path) -> None:
    """The run's summary from the moment its directory exists: `starting`, with the process that claimed
    it, so that a run killed in its first seconds leaves a directory that says what it is (the run
    directory's summaries keep the record: telemetry/run_directory.py)."""
    import datetime as _dt

    from duorl.runtime.atomic_files import write_json
    from duorl.runtime.process_record import this_process

    write_json(path / "run_summary.json", {"status": "starting", "process": this_process(),
                                           "started_at": _dt.datetime.now().isoformat(timespec="seconds")},
               "run summary")


def _take_over(path: Path) -> bool:
    """Reuse a directory whose run was killed before it started (telemetry/earlier_run.py): under an
    exclusive lock on the directory, the check again, its files removed and this run's first summary
    written, so that of two runs taking it over at once the second finds the first alive. False if the
    directory holds anything else by now."""
    import fcntl
    import shutil
    import sys

    from duorl.telemetry.earlier_run import dead_run_message, earlier_run

    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        run = earlier_run(path)
        if run is None or not run.never_started:
            return False
        message = dead_run_message(run)
        for entry in path.iterdir():
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        write_first_summary(path)
    finally:
        os.close(fd)  # releases the lock
    print(f"duorl: {KEY}={path}: {message}; reusing the directory", file=sys.stderr, flush=True)
    return True


def unused_name(default: Path) -> Path:
    """`default`, or the first `default-N` that does not exist (a data-parallel launcher names the run
    directory before rank 0 creates it)."""
    for i in range(1, _MAX_SUFFIX + 1):
        path = default if i == 1 else default.with_name(f"{default.name}-{i}")
        if not path.exists():
            return path
    return default


__all__ = ["check_new_run_dir", "claim_run_dir", "unused_name", "write_first_summary"]
