"""Why the G1 case of tests/envs/mjlab/test_staged_step_cuda.py parts (issue #40): the same resynced lockstep,
three ways, each reported instead of raised: as the test runs it (reset bodies as graphs), with the reset body
eager (the default on CUDA), and with the actor's observation noise off (mjlab's `enable_corruption`). In
every arm mjlab's own eager env also steps each tick a second time from the same state (restored, the same
draws): the eager run-to-run difference per term, the baseline of the test's tolerance rule
(tests/envs/mjlab/equality_bounds.py), printed next to the staged-vs-eager difference.

    python3 benchmarks/scripts/mjlab_staged_equality_h200.py [--device cuda|cpu] [--steps 100] [--envs 128]
        [--window 1] [--print-ticks 12] [--arms reset_graphs reset_eager no_obs_noise] [--no-rerun]
        [--json series.json]

GPU (after staging the mjlab wheels, ../shared/tools/device-mjlab.md; about 30-60 s per arm warm, 128 envs,
100 ticks; the first arm pays a cold warp cache):
    timeout 170 python3 benchmarks/scripts/mjlab_staged_equality_h200.py --device cuda --steps 100 --arms reset_graphs no_obs_noise
CPU dry check (Warp's CPU device runs its kernels in order: every difference should be 0.0):
    python3 benchmarks/scripts/mjlab_staged_equality_h200.py --device cpu --envs 3 --steps 12

`--window W` steps W ticks freely from each copied state (both eager runs and the staged one), instead of
one: how far the trajectories part when nothing resyncs them. Prints, per tick (the first `--print-ticks`),
the terms whose difference is nonzero in either comparison; per arm, a table of every term that parted:
the median, 90th percentile and worst tick of the staged-vs-eager and eager-vs-eager differences, and the
test's verdict (equality_bounds.judge). `--json PATH` writes every arm's per-tick series (per term, one
difference a tick, both comparisons), its counts and verdicts, rewritten after each arm: the raw numbers
behind the table, to judge the rule's constants on.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.envs.mjlab.equality_bounds import (K_MAX, K_MEDIAN, K_P90, Verdict, judge_all,  # noqa: E402
                                              over_bounds)
from tests.envs.mjlab.test_staged_step import G1, _pair_on  # noqa: E402
from tests.envs.mjlab.test_staged_step_cuda import CONTACT_TOL, _resynced_lockstep, _summary  # noqa: E402


def _no_noise(cfg: Any) -> None:
    for group in cfg.observations.values():
        group.enable_corruption = False


ARMS = {"reset_graphs": ({"reset_graphs": True}, None), "reset_eager": ({"reset_graphs": False}, None),
        "no_obs_noise": ({"reset_graphs": True}, _no_noise)}


def _tick_printer(limit: int) -> Any:
    def on_tick(tick: int, staged: dict[str, float], rerun: dict[str, float]) -> None:
        if tick >= limit:
            return
        parted = [f"{k} staged {staged.get(k, 0.0):.3g} eager {rerun.get(k, 0.0):.3g}"
                  for k in sorted(set(staged) | set(rerun)) if staged.get(k, 0.0) > 0 or rerun.get(k, 0.0) > 0]
        print(f"  tick {tick}: " + ("; ".join(parted) if parted else "every term 0.0 in both"), flush=True)
    return on_tick


def _stats(v: Any) -> str:
    """A series' median, 90th percentile and maximum, or dashes where there is none."""
    if v is None:
        return f"{'-':>9s} {'-':>9s} {'-':>9s}"
    return f"{v.median:9.3g} {v.p90:9.3g} {v.max:9.3g}"


def table(worst: dict[str, Any], tol: float) -> list[str]:
    """Every term that parted in either comparison: median, p90 and max of the staged-vs-eager and of the
    eager-vs-eager per-tick differences, and the test's verdict with its reason."""
    verdicts = judge_all(worst["staged_ticks"], worst["rerun_ticks"], tol)
    rows = [f"  {'':44s} {'staged vs eager':^29s} {'eager vs eager':^29s}",
            f"  {'term':44s} {'median':>9s} {'p90':>9s} {'max':>9s} {'median':>9s} {'p90':>9s} {'max':>9s}  verdict"]
    for k in sorted(verdicts):
        v = verdicts[k]
        if v.staged.max == 0 and (v.rerun is None or v.rerun.max == 0):
            continue
        rows.append(f"  {k[-44:]:44s} {_stats(v.staged)} {_stats(v.rerun)}  {'ok' if v.ok else 'OVER'} ({v.reason})")
    if len(rows) == 2:
        rows.append("  (every term 0.0 in both comparisons)")
    return rows


def _verdict_json(v: Verdict) -> dict[str, Any]:
    return {"ok": v.ok, "reason": v.reason, "staged": asdict(v.staged),
            "rerun": asdict(v.rerun) if v.rerun else None}


def dump_json(path: Path, args: argparse.Namespace, arms: dict[str, dict[str, Any]]) -> None:
    """Write the arms run so far to `path`: the arguments, the rule's constants and per arm the per-tick
    series of both comparisons, the counts and each term's verdict."""
    out = {"args": vars(args), "tol": CONTACT_TOL, "k_median": K_MEDIAN, "k_p90": K_P90, "k_max": K_MAX,
           "arms": {arm: {"counts": {k: v for k, v in w.items() if isinstance(v, int)},
                          "staged_ticks": w["staged_ticks"], "rerun_ticks": w["rerun_ticks"],
                          "verdicts": {k: _verdict_json(v) for k, v in
                                       judge_all(w["staged_ticks"], w["rerun_ticks"], CONTACT_TOL).items()}}
                    for arm, w in arms.items()}}
    path.write_text(json.dumps(out, indent=1, default=str) + "\n")


def main() -> int:
    import torch

    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--envs", type=int, default=128)
    p.add_argument("--window", type=int, default=1)
    p.add_argument("--print-ticks", type=int, default=12)
    p.add_argument("--no-rerun", dest="rerun", action="store_false", help="no eager-vs-eager baseline")
    p.add_argument("--arms", nargs="+", choices=tuple(ARMS), default=list(ARMS))
    p.add_argument("--json", type=Path, default=None, help="write the per-tick series of every arm here")
    args = p.parse_args()
    cuda = args.device.startswith("cuda")
    device, graphs = ("cuda:0", "cuda") if cuda else ("cpu", "cpu-replay")
    print(f"device {device}, {args.envs} envs, {args.steps} ticks, window {args.window}, tol {CONTACT_TOL}, "
          f"k median {K_MEDIAN}, p90 {K_P90}, max {K_MAX}", flush=True)
    done: dict[str, dict[str, Any]] = {}
    for arm in args.arms:
        kwargs, edit = ARMS[arm]
        t0 = time.perf_counter()
        eager, staged = _pair_on(device, G1, args.envs, 40, graphs, edit=edit, **kwargs)
        built = time.perf_counter() - t0
        print(f"{arm}: built in {built:.0f} s", flush=True)
        try:
            worst = _resynced_lockstep(eager, staged, args.steps, CONTACT_TOL, rerun=args.rerun,
                                       window=args.window, on_tick=_tick_printer(args.print_ticks))
        finally:
            eager.close()
            staged.close()
        done[arm] = worst
        if args.json is not None:
            dump_json(args.json, args, done)
        over = over_bounds(worst["staged_ticks"], worst["rerun_ticks"], CONTACT_TOL)
        verdict = f"OVER the test's bounds in {sorted(over)}" if over else "within the test's bounds"
        print(f"{arm}: {verdict} over {args.steps} ticks ({time.perf_counter() - t0:.0f} s): {_summary(worst)}",
              flush=True)
        for k, v in worst["first_over_tol"].items():
            print(f"  first over tol {CONTACT_TOL}: {k} at tick {v[0]} ({v[1]:.3g}): {v[2]}")
        print("\n".join(table(worst, CONTACT_TOL)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
