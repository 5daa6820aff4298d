"""Library noise kept off duorl's console while mjlab is imported and its tasks are built for a listing.

Warp's native library writes "Could not find or load the NVIDIA CUDA driver" to the process's stderr
(C fprintf, past Python's sys.stderr) on a machine without a GPU, and mujoco_warp warns (UserWarning)
that MULTICCD cannot give several contacts for height-field pairs, once per rough-terrain task. Neither
says anything a user of `duorl tasks` can act on. `quiet_libraries` catches both at their source (the
file descriptor, the warnings filter) and passes every other line through unchanged.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import warnings
from typing import Iterator

NOISE = (
    re.compile(r"^Warp CUDA warning: Could not find or load the NVIDIA CUDA driver"),
)
NOISY_WARNINGS = (r"MULTICCD is enabled",)


@contextlib.contextmanager
def quiet_libraries() -> Iterator[None]:
    """Run the block with the library noise above dropped; other output of the block reaches stderr."""
    with warnings.catch_warnings():
        for message in NOISY_WARNINGS:
            warnings.filterwarnings("ignore", message=message, category=UserWarning)
        try:
            fd = sys.__stderr__.fileno() if sys.__stderr__ is not None else 2
        except (AttributeError, OSError, ValueError):  # no real stderr (embedded): nothing to catch
            yield
            return
        sys.stderr.flush()
        saved = os.dup(fd)
        with tempfile.TemporaryFile() as caught:
            os.dup2(caught.fileno(), fd)
            try:
                yield
            finally:
                sys.stderr.flush()
                os.dup2(saved, fd)
                os.close(saved)
                caught.seek(0)
                text = caught.read().decode(errors="replace")
                kept = [line for line in text.splitlines() if not any(p.search(line) for p in NOISE)]
                if kept:
                    print("\n".join(kept), file=sys.stderr, flush=True)
