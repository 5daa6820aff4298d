"""The one way duorl replaces a file: a temp file in the same folder, fsynced, then renamed into place,
so a reader (or a resume after a crash) sees the old file or the new one, never half of one.

A write that fails (a full disk, a lost mount, a quota) removes its temp file, so it leaves no debris
on the disk it just filled, and raises WriteFailed, which names what was being written, where, and
the cause in words ("writing checkpoint runs/x/checkpoints/iter_000100.pt failed: no space left on
device"): runtime/outcome.py turns it into a failed run without a traceback.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, BinaryIO, Callable


class WriteFailed(OSError):
    """Writing a file failed; its temp file is gone and the previous file is intact. str() is the
    whole message (an OSError built from one argument prints just that)."""


class _RecordingFile:
    """A binary file whose write errors are kept: torch.save turns a failed write into a RuntimeError
    ("file write failed") that no longer says why."""

    def __init__(self, f: BinaryIO) -> None:
        self._f = f
        self.error: OSError | None = None

    def write(self, data: Any) -> int:
        try:
            return self._f.write(data)
        except OSError as e:
            self.error = e
            raise

    def flush(self) -> None:
        self._f.flush()


def atomic_write(path: os.PathLike | str, content: bytes | Callable[[Any], None], what: str) -> Path:
    """Replace `path` with `content` (bytes, or a function writing to a binary file object); `what`
    names the file in an error ("checkpoint", "run summary"). Returns the path."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    f: _RecordingFile | None = None
    try:
        with open(tmp, "wb") as raw:
            f = _RecordingFile(raw)
            if isinstance(content, bytes):
                f.write(content)
            else:
                content(f)
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        cause = e if isinstance(e, OSError) else (f.error if f is not None else None)
        if cause is None or isinstance(cause, WriteFailed):
            raise
        raise write_failed(what, path, cause) from e
    return path


def write_failed(what: str, path: os.PathLike | str, cause: OSError) -> WriteFailed:
    """The named error of a failed write ("writing metrics runs/x/metrics.jsonl failed: no space left
    on device"), for writers that append rather than replace."""
    if isinstance(cause, WriteFailed):
        return cause
    reason = (cause.strerror or str(cause)).lower()
    return WriteFailed(f"writing {what} {path} failed: {reason}")


def json_bytes(obj: Any) -> bytes:
    """`obj` as the indented JSON duorl writes (values JSON does not know become strings)."""
    return (json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n").encode("utf-8")


def write_json(path: os.PathLike | str, obj: Any, what: str = "file") -> Path:
    return atomic_write(path, json_bytes(obj), what)


def fsync_dir(directory: os.PathLike | str) -> None:
    """Make a rename in `directory` durable (best effort: not every filesystem allows it)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
