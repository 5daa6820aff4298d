"""Why the G1 case of tests/envs/mjlab/test_staged_step_cuda.py parts (issue #40): the same resynced lockstep,
three ways, each reported instead of raised: as the test runs it (reset bodies as graphs), with the reset body
eager (the default on CUDA), and with the actor's observation noise off (mjlab's `enable_corruption`).

    python3 benchmarks/scripts/mjlab_staged_equality_h200.py [--steps 300] [--envs 128]

Run on the GPU machine after staging the mjlab wheels (../shared/tools/device-mjlab.md). Prints one line
per arm: the worst relative differences, where the worst observation difference is (key, mjlab term, env,
both values) and which terms exceed the tolerance.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.envs.mjlab.test_staged_step import G1, _pair_on  # noqa: E402
from tests.envs.mjlab.test_staged_step_cuda import CONTACT_TOL, _resynced_lockstep  # noqa: E402


def _no_noise(cfg) -> None:
    for group in cfg.observations.values():
        group.enable_corruption = False


ARMS = {"reset_graphs": ({"reset_graphs": True}, None), "reset_eager": ({"reset_graphs": False}, None),
        "no_obs_noise": ({"reset_graphs": True}, _no_noise)}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--envs", type=int, default=128)
    p.add_argument("--arms", nargs="+", choices=tuple(ARMS), default=list(ARMS))
    args = p.parse_args()
    for arm in args.arms:
        kwargs, edit = ARMS[arm]
        t0 = time.perf_counter()
        eager, staged = _pair_on("cuda:0", G1, args.envs, 40, "cuda", edit=edit, **kwargs)
        try:
            worst = _resynced_lockstep(eager, staged, args.steps, CONTACT_TOL)
            print(f"{arm}: equal within {CONTACT_TOL} over {args.steps} ticks: {worst} ({time.perf_counter() - t0:.0f} s)",
                  flush=True)
        except AssertionError as e:
            print(f"{arm}: PARTED: {str(e).splitlines()[0]} ({time.perf_counter() - t0:.0f} s)", flush=True)
        finally:
            eager.close()
            staged.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
