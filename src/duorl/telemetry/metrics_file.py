"""Reading metrics.jsonl (one JSON object per logged iteration) and averaging its last rows."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """All rows of a metrics.jsonl file, in file order.

    A last line without its newline is skipped if it does not parse: the writer of a live run may be
    halfway through it. Any other malformed line is an error naming the line number.
    """
    text = Path(path).read_text(encoding="utf-8")
    lines = text.split("\n")
    rows: list[dict[str, Any]] = []
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)  # accepts NaN / Infinity too
        except json.JSONDecodeError as e:
            if i == len(lines):  # unterminated final line: a write in progress
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
