"""The tolerance rule of the staged step's CUDA equality test (test_staged_step_cuda.py), as a function.

MuJoCo Warp sums contact forces with atomics, in any order, so mjlab's own eager step run twice from one
copied state does not give the same bits in every term. The test measures that run-to-run difference in the
same run: each tick, the eager env steps a second time from the restored state with the same draws. Per
term it keeps two series over the ticks t = 1..T, each tick's worst relative difference |a - b| / (1 + |a|)
over envs and columns: s_t (staged vs eager) and e_t (eager vs eager, the baseline). The rule per term:

- NaN anywhere in either series fails;
- max_t s_t <= `tol` passes: the fixed tolerance a deterministic term is held to is never tightened (the
  rule only widens where a measurement says so; `tol` 0.0 stays bitwise);
- past `tol`, a term with no baseline (every e_t 0.0, or no rerun) fails: nothing says it may part;
- past `tol`, a term with a baseline passes only where the staged series looks like another draw of the
  same nondeterminism, read from each series' order statistics (the ticks are not paired):
  (a) median_t s_t <= max(ROUNDING_FLOOR, K_MEDIAN x median_t e_t),
  (b) p90_t s_t <= max(ROUNDING_FLOOR, K_P90 x p90_t e_t),
  (c) max_t s_t <= max(tol, K_MAX x max_t e_t).

Why not the worst over the run alone (the rule before, k = 3): the maximum of a heavy-tailed term is one
tail event. On the H200 (benchmarks/2026-12-03_startup_after_overlap_h200/equality.log, G1, 128 envs, 40
ticks) `critic.foot_contact_forces` (a contact made in one run and not the other) reached 1.02 staged
against 0.286 eager (3.6x) while its ticks agree (tick 4: 2.81e-3 against 2.80e-3). The median and the
90th percentile are what a systematic difference moves: a stale buffer or a generator out of step moves
every tick, an offset of c moves the median by c, a staged step k times as noisy moves both by k.

Why not a sign test (under exchangeable runs s_t > e_t in half the ticks): the staged step is not the same
computation as mjlab's eager step (its stages run as captured graphs, its own sums in its own order), so it
may round a little more than eager rounds against itself without being wrong. On the H200
`critic.base_lin_vel`'s staged difference was above twice the rerun's in 5 of 12 printed ticks and below
half of it in none, at the same size (median ratio 1.03): a sign test over 300 ticks would fail that.

The constants, from that run's per-term series (the 12 printed ticks and each comparison's worst of the 40,
13 values per term; tests/envs/mjlab/g1_equality_h200.py): the ratio staged/eager of the medians was 0.72
to 1.28 over the terms with a nonzero median, of the 90th percentiles 0.85 to 1.54, of the maxima 0.21 to
3.6 in the terms past `tol` (12.7 in `critic.foot_height`, 7.7e-5 against 6.1e-6: within `tol`). K_MEDIAN
2 and K_P90 3 leave about 1.6x and 2x over those; K_MAX 10 is about 3x over the measured 3.6x tail. The
margins are judgement: 13 values a term are few and the test's 300 ticks will spread differently (its
medians and percentiles less, its maxima more). ROUNDING_FLOOR stands in for a baseline statistic of 0.0
(a term that parts in a few ticks only): 1e-6 is float32 rounding in a relative difference (2^-23 = 1.2e-7
at 1.0), the size of the tick-0 differences before contacts amplify them (1.3e-8 to 1.1e-6 on the H200).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

K_MEDIAN = 2.0  # the staged median may be this many times the eager rerun's median
K_P90 = 3.0  # the staged 90th percentile may be this many times the eager rerun's
K_MAX = 10.0  # the staged worst tick may be this many times the eager rerun's worst (a heavy tail)
ROUNDING_FLOOR = 1e-6  # a median or percentile this small is float32 rounding, whatever the baseline's


@dataclass(frozen=True)
class SeriesStats:
    """The order statistics of one term's per-tick differences that the rule reads."""

    median: float
    p90: float
    max: float


@dataclass(frozen=True)
class Verdict:
    """One term's verdict: `ok`, why (`reason`, a few words), and the statistics of both series (`rerun`
    None where there is no baseline series)."""

    ok: bool
    reason: str
    staged: SeriesStats
    rerun: SeriesStats | None


def quantile(values: Sequence[float], q: float) -> float:
    """The `q` quantile of `values`, linear between order statistics (numpy's default, "inclusive")."""
    if not values or not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile {q} of {len(values)} values: need values and 0 <= q <= 1")
    xs = sorted(values)
    at = q * (len(xs) - 1)
    lo = int(at)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (at - lo) * (xs[hi] - xs[lo])


def series_stats(values: Sequence[float]) -> SeriesStats:
    """Median, 90th percentile and maximum of one term's per-tick differences (none of them NaN)."""
    return SeriesStats(quantile(values, 0.5), quantile(values, 0.9), max(values))


def _check(values: Sequence[float], name: str) -> None:
    if not values:
        raise ValueError(f"no {name} ticks: every term has one difference a tick")
    if any(v < 0 for v in values):
        raise ValueError(f"a {name} difference below 0: {min(values)}")


def judge(staged: Sequence[float], rerun: Sequence[float] | None, tol: float) -> Verdict:
    """The rule of the module docstring for one term: `staged` the per-tick staged-vs-eager differences,
    `rerun` the eager-vs-eager ones of the same ticks (None or empty: no baseline), `tol` the fixed one."""
    if tol < 0:
        raise ValueError(f"tol {tol} must be >= 0")
    _check(staged, "staged")
    rerun = list(rerun or ())
    if rerun:
        _check(rerun, "rerun")
    nan = SeriesStats(math.nan, math.nan, math.nan)
    if any(math.isnan(v) for v in [*staged, *rerun]):
        return Verdict(False, "NaN", nan, nan if rerun else None)
    s = series_stats(staged)
    e = series_stats(rerun) if rerun else None
    if s.max <= tol:
        return Verdict(True, "within tol", s, e)
    if e is None or e.max == 0.0:
        return Verdict(False, "over tol, no eager run-to-run difference", s, e)
    for name, got, base, k, floor in (("median", s.median, e.median, K_MEDIAN, ROUNDING_FLOOR),
                                      ("p90", s.p90, e.p90, K_P90, ROUNDING_FLOOR),
                                      ("max", s.max, e.max, K_MAX, tol)):
        if not got <= max(floor, k * base):
            return Verdict(False, f"{name} over {k:g}x the eager rerun's", s, e)
    return Verdict(True, "like the eager rerun", s, e)


def judge_all(staged: Mapping[str, Sequence[float]], rerun: Mapping[str, Sequence[float]],
              tol: float) -> dict[str, Verdict]:
    """Every term's verdict, by term; a term missing from `rerun` has no baseline."""
    return {term: judge(series, rerun.get(term), tol) for term, series in staged.items()}


def over_bounds(staged: Mapping[str, Sequence[float]], rerun: Mapping[str, Sequence[float]],
                tol: float) -> dict[str, Verdict]:
    """The terms that fail the rule, with their verdicts: empty when the staged step passes."""
    return {term: v for term, v in judge_all(staged, rerun, tol).items() if not v.ok}
