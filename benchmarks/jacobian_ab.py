"""The G1 collector tick with MuJoCo Warp's constraint Jacobian sparse (what `jacobian=auto` picks for
the G1's nv=35) against dense, as an A/B in one process (run on a GPU machine):

    python3 benchmarks/jacobian_ab.py [--num-envs 4096] [--ticks 200] [--arms sparse dense ...]

Why: the kernel profile of a replayed g1_walk_flat tick (2026-11-29_tick_profile_h200/) puts about 90% of
its GPU time in MuJoCo Warp, led by sparse-Jacobian kernels (_JTDAJ_sparse, _efc_contact_jac_sparse,
the sparse qfrc_constraint update). A dense Jacobian computes the same constraint forces with a different
memory layout, so only speed should change. Each arm builds the tick as `duorl bench collector` does,
captured (one graph per tick), with the step tensor code uncompiled in every arm (the compiled arm's cold
compile takes minutes; the physics is what differs). The arms alternate (A B A B) to spread drift.
"""

from __future__ import annotations

import argparse
import json
import sys

import mujoco
import torch

from duorl.bench.collector import _measure, build_collector_tick
from duorl.config.load import load_config
from duorl.envs.g1 import model as g1_model

JACOBIAN = {"sparse": mujoco.mjtJacobian.mjJAC_SPARSE, "dense": mujoco.mjtJacobian.mjJAC_DENSE,
            "auto": mujoco.mjtJacobian.mjJAC_AUTO}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--num-envs", type=int, default=4096)
    p.add_argument("--ticks", type=int, default=200)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--arms", nargs="+", default=["sparse", "dense", "sparse", "dense"], choices=sorted(JACOBIAN))
    p.add_argument("--out", default=None)
    a = p.parse_args()
    if not torch.cuda.is_available():
        print("error: needs a CUDA device", file=sys.stderr)
        return 2
    cfg = load_config("sac", "g1_walk_flat", "mjwarp", ["training.devices=[0]"])
    set_options = g1_model._set_options
    runs = []
    for arm in a.arms:
        def patched(spec: mujoco.MjSpec, _arm: str = arm) -> None:
            set_options(spec)
            spec.option.jacobian = JACOBIAN[_arm]

        g1_model._set_options = patched
        try:
            tick = build_collector_tick(cfg, a.num_envs, "cuda", cuda_graph=True, compile=False)
        finally:
            g1_model._set_options = set_options
        r = {"jacobian": arm, "is_sparse": bool(tick.env.backend._m.is_sparse), **_measure(tick, a.warmup, a.ticks)}
        print(json.dumps(r), flush=True)
        runs.append(r)
        tick.release()
        del tick
        torch.cuda.empty_cache()
    out = {"command": " ".join(sys.argv), "gpu": torch.cuda.get_device_name(0), "runs": runs}
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
