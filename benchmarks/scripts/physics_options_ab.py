"""The g1_walk_flat collector tick under different MuJoCo Warp options, as an A/B in one process (GPU):

    python3 benchmarks/scripts/physics_options_ab.py [--num-envs 4096] [--ticks 200] [--repeats 2] \\
        --arms default jacobian=dense njmax=160 iterations=6 physics_only=1 physics_only=1,graph_conditional=1 \\
        bd.linesearch_iterative=64

Each arm is `default` or comma-joined `option=value` pairs: `jacobian` (sparse|dense|auto), `iterations`,
`ls_iterations`, `tolerance`, `ls_tolerance` (the MjSpec options), `njmax` / `nconmax` (MuJoCo Warp's
per-world capacities), `bd.FIELD` (a field of MuJoCo Warp's `Model.block_dim`, the thread-block width of one
of its tiled kernels: the same arithmetic, launched differently), `physics_only=1` (time the 4 physics
substeps alone, as one warp graph, after the warm-up ticks) and, with it, `graph_conditional=1` (MuJoCo Warp's
early-exit solver loop, which duorl turns off because its capture pauses torch's: so it is timed on the
physics alone). The other arms build the tick as `duorl bench collector` does, captured, with the step tensor
code uncompiled (a cold compile takes minutes; the physics is what differs). Arms are repeated round-robin (A
B C A B C) to spread drift. Changing `iterations`, `tolerance` or the capacities changes the physics: those
arms measure cost, not a proposal.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any, Callable

import mujoco
import torch

from duorl.cli.bench.collector import _measure, build_collector_tick
from duorl.cli.bench.report import emit
from duorl.cli.configure import load_config
from duorl.envs.g1 import model as g1_model
from duorl.envs.tasks import g1_common

JACOBIAN = {"sparse": mujoco.mjtJacobian.mjJAC_SPARSE, "dense": mujoco.mjtJacobian.mjJAC_DENSE,
            "auto": mujoco.mjtJacobian.mjJAC_AUTO}
SPEC_OPTIONS = {"jacobian", "iterations", "ls_iterations", "tolerance", "ls_tolerance"}
CAPACITIES = {"njmax", "nconmax"}
TIMING = {"physics_only", "graph_conditional"}


def parse_arm(arm: str) -> dict[str, str]:
    if arm == "default":
        return {}
    out = {}
    for pair in arm.split(","):
        key, _, value = pair.partition("=")
        if (key not in SPEC_OPTIONS | CAPACITIES | TIMING and not _block_dim_field(key)) or not value:
            raise SystemExit(f"error: arm {arm!r}: unknown option {key!r} (or no value)")
        out[key] = value
    if _on(out.get("graph_conditional")) and not _on(out.get("physics_only")):
        raise SystemExit(f"error: arm {arm!r}: graph_conditional=1 needs physics_only=1 (it cannot join torch's capture)")
    return out


def _block_dim_field(key: str) -> str | None:
    """`bd.FIELD` -> FIELD when FIELD is one of MuJoCo Warp's BlockDim fields, else None."""
    from mujoco_warp._src.types import BlockDim

    field = key.removeprefix("bd.")
    return field if key.startswith("bd.") and field in BlockDim.__dataclass_fields__ else None


def _on(value: str | None) -> bool:
    return value in ("1", "true")


def _physics_only(tick: Any, ticks: int, conditional: bool) -> dict[str, Any]:
    """The tick backend's substeps as one warp graph, the solver loop conditional or fixed."""
    import warp as wp

    b = tick.env.backend
    b._m.opt.graph_conditional = conditional
    dev = b._wdev
    with wp.ScopedDevice(dev):
        b._substeps()  # load the modules outside the capture
        wp.synchronize_device(dev)
        with wp.ScopedCapture(dev) as cap:
            b._substeps()
        for _ in range(10):
            wp.capture_launch(cap.graph)
        wp.synchronize_device(dev)
        t0 = time.perf_counter()
        for _ in range(ticks):
            wp.capture_launch(cap.graph)
        wp.synchronize_device(dev)
        seconds = time.perf_counter() - t0
    n = b.num_envs
    return {"physics_only": True, "graph_conditional": conditional, "ms_per_tick": round(seconds * 1e3 / ticks, 4),
            "collector_env_steps_per_s": round(n * ticks / seconds, 1)}


def run_arm(cfg: Any, arm: str, num_envs: int, warmup: int, ticks: int) -> dict[str, Any]:
    opts = parse_arm(arm)
    set_options, capacity = g1_model._set_options, dict(g1_common.MJWARP_CAPACITY)

    def patched(spec: mujoco.MjSpec) -> None:
        set_options(spec)
        for key, value in opts.items():
            if key == "jacobian":
                spec.option.jacobian = JACOBIAN[value]
            elif key in ("iterations", "ls_iterations"):
                setattr(spec.option, key, int(value))
            elif key in ("tolerance", "ls_tolerance"):
                setattr(spec.option, key, float(value))

    g1_model._set_options = patched
    g1_common.MJWARP_CAPACITY.update({k: int(v) for k, v in opts.items() if k in CAPACITIES})
    try:
        tick = build_collector_tick(cfg, num_envs, "cuda", cuda_graph=True, compile=False)
    finally:
        g1_model._set_options = set_options
        g1_common.MJWARP_CAPACITY.clear()
        g1_common.MJWARP_CAPACITY.update(capacity)
    # the tick is captured on its first run, so block widths set here are the ones its kernels launch with
    block_dim = tick.env.backend._m.block_dim
    for key, value in opts.items():
        if field := _block_dim_field(key):
            setattr(block_dim, field, int(value))
    try:
        if _on(opts.get("physics_only")):
            tick.run(0, warmup)  # a realistic state: the policy has stepped the worlds for a while
            torch.cuda.synchronize()
            return {"arm": arm, **_physics_only(tick, ticks, _on(opts.get("graph_conditional")))}
        return {"arm": arm, **_measure(tick, warmup, ticks)}
    finally:
        tick.release()
        del tick
        torch.cuda.empty_cache()


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--num-envs", type=int, default=4096)
    p.add_argument("--ticks", type=int, default=200)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--arms", nargs="+", default=["default", "jacobian=dense"])
    p.add_argument("--out", default=None)
    a = p.parse_args()
    for arm in a.arms:
        parse_arm(arm)  # fail before building anything
    if not torch.cuda.is_available():
        print("error: needs a CUDA device", file=sys.stderr)
        return 2
    round_robin(run_arm, a)
    return 0


def round_robin(run: Callable[..., dict[str, Any]], a: argparse.Namespace) -> None:
    """`run(cfg, arm, num_envs, warmup, ticks)` for every arm, `a.repeats` times round-robin (A B A B),
    each result printed as it comes; then all of them, with the command and GPU, to `a.out`."""
    cfg = load_config("sac", "g1_walk_flat", "mjwarp", ["training.devices=[0]"])
    runs = []
    for _ in range(a.repeats):
        for arm in a.arms:
            r = run(cfg, arm, a.num_envs, a.warmup, a.ticks)
            print(json.dumps(r), flush=True)
            runs.append(r)
    emit({"command": " ".join(sys.argv), "gpu": torch.cuda.get_device_name(0), "runs": runs}, a.out)


if __name__ == "__main__":
    raise SystemExit(main())
