"""Every line a duorl process prints goes out in one write, so that two processes writing to one
terminal, pipe or log at the same moment never cut into each other's lines (issue #39).

With PYTHONUNBUFFERED=1 or `python -u` (what launchers, schedulers and duorl's own tests set), Python's
stdout and stderr write through: `print(line)` is two write calls, the text and then its newline, and a
collector's or another rank's line written between them joins the two ("...150 iterations
publishedduorl: the collector waits..."). Line buffering without write-through keeps each print's text
until its newline and writes both at once; one write to a pipe of up to PIPE_BUF bytes (4 KiB) is
atomic, and the lines duorl prints are far shorter. Every print site keeps working unchanged.

Called at a process's first instruction: `duorl/__main__.py` for the `duorl` command, and
runtime/orphans.py's arm_from_environment for every process another duorl process starts (a collector,
a data-parallel rank). Stdlib only: it runs before anything heavy is imported.
"""

from __future__ import annotations

import sys


def whole_lines() -> None:
    """Make stdout and stderr write each line whole (line buffering, no write-through). A stream that
    is not a text file of its own (a test's capture, a replaced object) is left as it is."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is None:
            continue
        try:
            reconfigure(line_buffering=True, write_through=False)
        except (ValueError, OSError):  # closed, or a stream that cannot change its buffering
            pass


__all__ = ["whole_lines"]
