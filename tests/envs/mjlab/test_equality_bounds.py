"""The CUDA equality test's tolerance rule (equality_bounds.py) on synthetic numbers: deterministic terms
keep the fixed tolerance, terms that part between two eager runs are bounded by that measured difference."""

from __future__ import annotations

import math

import pytest

from tests.envs.mjlab.equality_bounds import K_BASELINE, over_bounds, term_bound


def test_a_term_that_never_parted_between_eager_runs_keeps_the_fixed_tolerance():
    assert term_bound(0.0, 1e-3) == 1e-3
    assert over_bounds({"actor:policy.joint_pos": 1.1e-3}, {"actor:policy.joint_pos": 0.0}, 1e-3) == {
        "actor:policy.joint_pos": (1.1e-3, 0.0, 1e-3)}
    assert over_bounds({"actor:policy.joint_pos": 1e-3}, {"actor:policy.joint_pos": 0.0}, 1e-3) == {}


def test_a_bitwise_tolerance_stays_bitwise_where_the_eager_runs_agree():
    assert over_bounds({"reward": 1e-12}, {"reward": 0.0}, 0.0) == {"reward": (1e-12, 0.0, 0.0)}
    assert over_bounds({"reward": 0.0}, {"reward": 0.0}, 0.0) == {}


def test_a_term_that_parts_between_eager_runs_is_bounded_by_k_times_that_difference():
    # the G1's foot contact forces on the H200: staged vs eager 2.9e-3, eager vs eager (say) 2.5e-3
    staged = {"critic:critic.foot_contact_forces": 2.9e-3, "critic:critic.joint_pos": 4e-6}
    baseline = {"critic:critic.foot_contact_forces": 2.5e-3, "critic:critic.joint_pos": 1e-7}
    assert over_bounds(staged, baseline, 1e-3) == {}
    bound = K_BASELINE * 2.5e-3
    assert term_bound(2.5e-3, 1e-3) == pytest.approx(bound)
    staged["critic:critic.foot_contact_forces"] = bound * 1.01
    assert list(over_bounds(staged, baseline, 1e-3)) == ["critic:critic.foot_contact_forces"]


def test_a_tiny_baseline_never_tightens_the_fixed_tolerance():
    assert term_bound(1e-9, 1e-3) == 1e-3
    assert over_bounds({"t": 9e-4}, {"t": 1e-9}, 1e-3) == {}


def test_a_term_without_a_baseline_or_with_nan_fails_closed():
    assert over_bounds({"t": 2e-3}, {}, 1e-3) == {"t": (2e-3, 0.0, 1e-3)}
    assert "t" in over_bounds({"t": math.nan}, {"t": 1e-2}, 1e-3)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError):
        term_bound(-1.0, 1e-3)
    with pytest.raises(ValueError):
        term_bound(1.0, 1e-3, k=0.5)
