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
    return (path / "run_config.json").is_file() or (path / "checkpoints" / "latest.json").is_file()


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
        if _is_run_dir(p):
            raise _refuse(value, "is the directory of an earlier run (a run directory is never reused: its "
                                 "checkpoints, metrics and summary would be overwritten)",
                          f"continue that run with training.resume={p} (it writes a new run directory), or {fix}")
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
            raise _refuse(log_dir, "exists (another run created it since the run's checks)") from None
        except OSError as e:
            raise _refuse(log_dir, f"cannot be created ({e.strerror or e})",
                          f"pick a writable place for {KEY}") from None
        return path
    for i in range(1, _MAX_SUFFIX + 1):
        path = default if i == 1 else default.with_name(f"{default.name}-{i}")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            os.mkdir(path)
            return path
        except FileExistsError:
            continue
        except OSError as e:
            raise _refuse(None, f"the default run directory {path} cannot be created ({e.strerror or e})",
                          f"set {KEY} to a writable place") from None
    raise _refuse(None, f"{_MAX_SUFFIX} run directories named {default}-* exist already", f"set {KEY}",)


def unused_name(default: Path) -> Path:
    """`default`, or the first `default-N` that does not exist (a data-parallel launcher names the run
    directory before rank 0 creates it)."""
    for i in range(1, _MAX_SUFFIX + 1):
        path = default if i == 1 else default.with_name(f"{default.name}-{i}")
        if not path.exists():
            return path
    return default


__all__ = ["check_new_run_dir", "claim_run_dir", "unused_name"]
