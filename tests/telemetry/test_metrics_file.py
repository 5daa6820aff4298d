"""metrics.jsonl reading and the mean of the last N rows."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from duorl.telemetry.metrics_file import mean_of_last, read_metrics, summary_of_last


def _write(path: Path, rows: list[dict], tail: str = "") -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + tail)
    return path


def test_read_rows_in_order_skipping_blank_lines(tmp_path: Path) -> None:
    p = tmp_path / "metrics.jsonl"
    p.write_text('{"iteration": 1, "a": 1.0}\n\n{"iteration": 2, "a": NaN}\n')
    rows = read_metrics(p)
    assert [r["iteration"] for r in rows] == [1, 2] and math.isnan(rows[1]["a"])


def test_unterminated_last_line_is_a_write_in_progress(tmp_path: Path) -> None:
    p = _write(tmp_path / "m.jsonl", [{"iteration": 1}], tail='{"iteration": 2, "a"')
    assert read_metrics(p) == [{"iteration": 1}]


def test_malformed_line_in_the_middle_is_an_error(tmp_path: Path) -> None:
    p = tmp_path / "m.jsonl"
    p.write_text('{"iteration": 1}\n{oops\n{"iteration": 3}\n')
    with pytest.raises(ValueError, match=r"m\.jsonl:2: not a JSON object"):
        read_metrics(p)
    p.write_text('{"iteration": 1}\n[1, 2]\n')
    with pytest.raises(ValueError, match=r":2: not a JSON object \(got list\)"):
        read_metrics(p)


def test_mean_of_numeric_fields_only() -> None:
    rows = [
        {"iteration": 1, "Perf/iteration_ms": 10.0, "flag": True, "status": "ok", "Loss/q": None},
        {"iteration": 2, "Perf/iteration_ms": 20.0, "flag": False, "status": "ok", "Loss/q": 4},
    ]
    assert mean_of_last(rows, 100) == {"iteration": 1.5, "Perf/iteration_ms": 15.0, "Loss/q": 4.0}


def test_last_n_window_and_late_fields() -> None:
    rows = [{"iteration": i, "x": float(i)} for i in range(10)]
    rows[-1]["late"] = 7.0
    assert mean_of_last(rows, 3) == {"iteration": 8.0, "x": 8.0, "late": 7.0}
    assert mean_of_last(rows, 1000)["x"] == 4.5


def test_nan_values_are_left_out_and_all_nan_is_nan() -> None:
    rows = [{"a": 1.0, "b": float("nan")}, {"a": float("nan"), "b": float("nan")}, {"a": 3.0}]
    m = mean_of_last(rows, 3)
    assert m["a"] == 2.0 and math.isnan(m["b"])


def test_n_must_be_positive() -> None:
    with pytest.raises(ValueError):
        mean_of_last([{"a": 1}], 0)


def test_summary_of_last() -> None:
    rows = [{"iteration": i * 10, "x": 1.0} for i in range(1, 6)]
    s = summary_of_last(rows, 2)
    assert s == {"iterations": [40, 50], "n": 2, "mean": {"iteration": 45.0, "x": 1.0}}
    assert summary_of_last([], 5) == {"iterations": [None, None], "n": 0, "mean": {}}
