"""benchmarks/scripts/mjlab_tick_profile.py's timing rounds on synthetic numbers: the arms alternate
(ABC CBA ...), and each arm's median, spread and ratio to eager come from the same rounds."""

from __future__ import annotations

import pytest

from tests.benchmark_scripts import load_script


def _script():
    return load_script("mjlab_tick_profile")


def test_rounds_alternate_the_order():
    m = _script()
    assert m.round_order(["eager", "staged", "graphs"], 3) == [
        ["eager", "staged", "graphs"], ["graphs", "staged", "eager"], ["eager", "staged", "graphs"]]


def test_medians_spreads_and_ratios_come_from_the_same_rounds():
    m = _script()
    # a slow round (the machine busy) moves both arms: the ratio within rounds stays 0.9
    rounds = [{"eager": 10.0, "staged": 9.0}, {"eager": 20.0, "staged": 18.0}, {"eager": 12.0, "staged": 10.8}]
    s = m.summarize_rounds(rounds)
    assert s["eager"]["ms_per_tick_median"] == 12.0
    assert (s["eager"]["ms_per_tick_min"], s["eager"]["ms_per_tick_max"]) == (10.0, 20.0)
    assert "ratio_to_eager_median" not in s["eager"]
    assert s["staged"]["ms_per_tick_median"] == pytest.approx(10.8)
    assert s["staged"]["ratio_to_eager_median"] == pytest.approx(0.9)
    assert s["staged"]["ratio_to_eager_min"] == pytest.approx(0.9) == s["staged"]["ratio_to_eager_max"]


def test_without_an_eager_arm_there_is_no_ratio():
    s = _script().summarize_rounds([{"staged": 1.0}, {"staged": 3.0}])
    assert s == {"staged": {"ms_per_tick_rounds": [1.0, 3.0], "ms_per_tick_median": 2.0, "ms_per_tick_min": 1.0,
                            "ms_per_tick_max": 3.0}}
