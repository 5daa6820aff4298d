"""Where multiprocessing puts the Unix socket that hands a collector the learner's shared CPU tensors.

A CPU tensor sent through a pipe travels as a file descriptor, which multiprocessing passes over a Unix
socket in `$TMPDIR/pymp-XXXXXXXX/listener-XXXXXXXX`. A socket's path is limited to 107 bytes on Linux, so a
long TMPDIR (a cluster job's scratch folder, torchrun's or pytest's nested ones) fails the send with
"AF_UNIX path too long", which the collector sees as its learner hanging up. Python 3.14 falls back to a
short system folder in that case (cpython#132124); the Pythons duorl runs on do not, so the learner does
the same before its first send.
"""

from __future__ import annotations

import multiprocessing.util
import os
import tempfile

from duorl.config.errors import InputRefused

SUN_PATH_MAX = 107  # bytes of a Unix socket's path on Linux (sun_path is 108, with its NUL)
# what multiprocessing adds to its base folder: "/pymp-" + 8 characters, "/listener-" + 8 characters
_SUFFIX = len("/pymp-XXXXXXXX") + len("/listener-XXXXXXXX")
SHORT_BASES = ("/tmp", "/var/tmp", "/dev/shm")


class SocketDirTooLong(InputRefused):
    """No folder here is short enough for multiprocessing's socket: the run is refused (exit code 2)."""


def fits(base: str) -> bool:
    """Whether multiprocessing's socket under `base` fits a Unix socket's path."""
    return len(os.fsencode(base)) + _SUFFIX <= SUN_PATH_MAX


def ensure_short_socket_dir() -> str | None:
    """Make sure multiprocessing's temporary folder (created once per process, removed at its exit) is one
    whose socket path fits: where tempfile's folder is short enough, nothing is done (None); else the folder
    is created now under the first writable folder of SHORT_BASES and returned. Raises SocketDirTooLong,
    naming TMPDIR and the fix, where the folder exists already and is too long, or no short folder is
    writable."""
    if _created():
        current = multiprocessing.util.get_temp_dir()
        if fits(os.path.dirname(current)):
            return None
        raise SocketDirTooLong(_too_long(current, "this process created it before duorl could choose"))
    if fits(tempfile.gettempdir()):
        return None
    for base in SHORT_BASES:
        if os.path.isdir(base) and os.access(base, os.W_OK | os.X_OK):
            saved = tempfile.tempdir
            tempfile.tempdir = base  # read by get_temp_dir's mkdtemp only: restored at once
            try:
                return multiprocessing.util.get_temp_dir()
            finally:
                tempfile.tempdir = saved
    raise SocketDirTooLong(_too_long(tempfile.gettempdir(), f"none of {', '.join(SHORT_BASES)} is writable"))


def _created() -> bool:
    """Whether this process's multiprocessing folder exists already (get_temp_dir creates it on its first
    call and keeps it in the process's config)."""
    return multiprocessing.current_process()._config.get("tempdir") is not None  # noqa: SLF001 - no public probe


def _too_long(path: str, why: str) -> str:
    return (f"TMPDIR={os.environ.get('TMPDIR', '')!r}: multiprocessing's socket under {path!r} would be longer "
            f"than a Unix socket's {SUN_PATH_MAX} bytes ({why}); "
            f"fix: export TMPDIR as a folder of at most {SUN_PATH_MAX - _SUFFIX} characters")
