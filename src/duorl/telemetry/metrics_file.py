"""Reading metrics.jsonl (one JSON object per logged iteration) and averaging its last rows."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

RETURN_KEY = "Train/mean_episode_return"
# what the console, the summary line and the plot say where no episode has ended (a run shorter than one
# episode: the 200-step pendulum in its first 200 iterations)
NO_EPISODE_YET = "no episode finished yet"


def read_metrics(path: str | Path, notes: list[str] | None = None) -> list[dict[str, Any]]:
    """All rows of a metrics.jsonl file, in file order.

    A last line that does not parse is skipped (with a note appended to `notes`): the writer of a live
    run may be halfway through it, and a run killed while writing it leaves it torn. Any other
    malformed line is an error naming the line number; a file that is not UTF-8 text is an error
    naming the file.
    """
    raw = Path(path).read_bytes()
    # a crash can also leave the unwritten tail of the file as zeros
    stripped = raw.rstrip(b"\0")
    try:
        text = stripped.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path} is not a metrics.jsonl file (binary data: byte 0x{stripped[e.start]:02x} at offset "
                         f"{e.start} is not UTF-8 text)") from None
    if "\0" in text:
        raise ValueError(f"{path} is not a metrics.jsonl file (binary data: a NUL byte at offset {text.index(chr(0))})")
    lines = text.split("\n")
    last = max((i for i, line in enumerate(lines, start=1) if line.strip()), default=0)
    rows: list[dict[str, Any]] = []
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)  # accepts NaN / Infinity too
        except json.JSONDecodeError as e:
            if i == last:  # the last line: a write in progress, or one a crash cut short
                if notes is not None:
                    notes.append(f"skipped the torn last line {i} of {path} (a run killed while writing it, or "
                                 "one writing it now)")
                continue
            raise ValueError(f"{path}:{i}: not a JSON object ({e.msg})") from None
        if not isinstance(row, dict):
            raise ValueError(f"{path}:{i}: not a JSON object (got {type(row).__name__})")
        rows.append(row)
    return rows


def _number(v: Any) -> float | None:
    # bool is an int subclass but not a measurement; null (a non-finite value the writer dropped) is skipped
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v)


def mean_of_last(rows: list[dict[str, Any]], n: int) -> dict[str, float]:
    """Mean of every numeric field over the last n rows (all rows if fewer), keys in first-seen order.

    NaN values are left out of a field's mean; a field with no finite-or-infinite value left is NaN.
    Each field is averaged over the rows that have it (metrics may start late, e.g. losses).
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for row in rows[-n:]:
        for k, v in row.items():
            x = _number(v)
            if x is None:
                continue
            sums.setdefault(k, 0.0)
            counts.setdefault(k, 0)
            if math.isnan(x):
                continue
            sums[k] += x
            counts[k] += 1
    return {k: (sums[k] / counts[k] if counts[k] else math.nan) for k in sums}


def summary_of_last(rows: list[dict[str, Any]], n: int) -> dict[str, Any]:
    """{"iterations": [first, last], "n": rows used, "mean": {...}} for the last n rows."""
    window = rows[-n:] if n >= 1 else []
    its = [r.get("iteration") for r in window]
    return {
        "iterations": [its[0], its[-1]] if its else [None, None],
        "n": len(window),
        "mean": mean_of_last(rows, n),
    }
