"""The tolerance rule of the staged step's CUDA equality test (test_staged_step_cuda.py), as a function.

MuJoCo Warp sums contact forces with atomics, in any order, so mjlab's own eager step run twice from one
copied state does not give the same bits in every term. The test measures that run-to-run difference in the
same run (the eager env stepped twice from each state) and bounds each term by it:

- a term whose eager-vs-eager difference stayed 0.0 over every tick is deterministic: the staged step
  must meet the test's fixed tolerance `tol` there, as before;
- a term whose eager-vs-eager difference was nonzero gets max(tol, k x that difference): the staged step
  may part from mjlab's step only as far as mjlab's step parts from itself (k for the spread of a maximum
  over a few hundred ticks: both maxima sample the same distribution when the staged step adds nothing).

Differences are the test's relative ones, |a - b| / (1 + |a|), the maximum over envs, columns and ticks.
"""

from __future__ import annotations

from typing import Mapping

# how far the staged step's worst difference may exceed the eager run-to-run worst difference of a term
K_BASELINE = 3.0


def term_bound(baseline: float, tol: float, k: float = K_BASELINE) -> float:
    """The bound of one term: `tol` where the eager run-to-run difference `baseline` is 0.0, else
    max(tol, k x baseline) (never tighter than `tol`: the rule only widens where a measurement says so)."""
    if baseline < 0 or tol < 0 or k < 1:
        raise ValueError(f"baseline {baseline}, tol {tol} must be >= 0 and k {k} >= 1")
    return tol if baseline == 0.0 else max(tol, k * baseline)


def over_bounds(staged: Mapping[str, float], baseline: Mapping[str, float], tol: float,
                k: float = K_BASELINE) -> dict[str, tuple[float, float, float]]:
    """The terms whose staged-vs-eager difference exceeds their bound: {term: (staged, baseline, bound)}.
    A term without a baseline (the eager rerun did not measure it) is held to `tol`."""
    out = {}
    for term, d in staged.items():
        b = baseline.get(term, 0.0)
        bound = term_bound(b, tol, k)
        if not d <= bound:  # NaN fails too
            out[term] = (d, b, bound)
    return out
