"""What a g1_walk_flat collector tick costs beyond its physics, in one process (GPU):

    python3 benchmarks/scripts/tick_parts_ab.py [--num-envs 4096] [--ticks 200] [--warmup 30] [--arms full norand nophys shaken]

Each arm builds the collector's tick as `duorl bench collector` does (captured; sim.tick_compile
resolved as in a run), runs `--warmup` ticks, times `--ticks` ticks, and then, where the arm has
physics, times the same backend's 4 substeps alone as one warp graph (benchmarks/scripts/physics_options_ab.py):
  full    the tick as it runs;
  norand  the same without the per-world friction/mass randomisation (MuJoCo Warp then reads one
          shared row of those model fields instead of one row per world);
  nophys  the tick with the physics substeps left out (MjWarpBackend._substeps does nothing): what the
          policy, noise, observations, rewards, resets and replay write cost on their own;
  shaken  after the warm-up ticks (uncompiled: only the physics is timed), the backend's substeps alone
          from one saved state, twice: holding the last controls (as `full` times them), and with new
          controls before every step from uniform actions in [-1, 1] through the task's action
          transform, as the untrained actor's noisy actions come (a few small kernels more per step).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import torch

from duorl.cli.bench.collector import _measure, build_collector_tick
from duorl.config.switches import tick_compile_enabled
from duorl.envs.backends.mjwarp import MjWarpBackend
from duorl.envs.tasks.g1_common import G1TaskBase
from physics_options_ab import _physics_only, round_robin

ARMS = ("full", "norand", "nophys", "shaken")


def _physics_from_state(tick: Any, ticks: int, shake: bool) -> float:
    """ms per control step of the backend's substeps as one warp graph on a torch side stream (so the
    torch control writes and the graph are ordered), from the state the tick left."""
    import warp as wp

    b, task = tick.env.backend, tick.env.task
    state = b.state_dict()
    n, dim = b.num_envs, tick.env.spec.action_dim
    gen = torch.Generator(device=b.device).manual_seed(0)
    side = torch.cuda.Stream(b.device)
    side.wait_stream(torch.cuda.current_stream(b.device))
    ws = wp.stream_from_torch(side)
    with torch.cuda.stream(side), wp.ScopedDevice(b._wdev), wp.ScopedStream(ws, sync_enter=False):
        b._substeps()  # load the modules outside the capture
        with wp.ScopedCapture(b._wdev, stream=ws) as cap:
            b._substeps()
        b.load_state_dict(state)

        def step() -> None:
            if shake:
                actions = torch.rand(n, dim, generator=gen, device=b.device) * 2 - 1
                b.ctrl.copy_(task.apply_action(actions))
            wp.capture_launch(cap.graph, stream=ws)

        for _ in range(10):
            step()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(ticks):
            step()
        torch.cuda.synchronize()
        seconds = time.perf_counter() - t0
        b.load_state_dict(state)
    return round(seconds * 1e3 / ticks, 4)


def run_arm(cfg: Any, arm: str, num_envs: int, warmup: int, ticks: int) -> dict[str, Any]:
    substeps, randomization = MjWarpBackend._substeps, G1TaskBase.model_randomization
    if arm == "nophys":
        MjWarpBackend._substeps = lambda self: None
    if arm == "norand":
        G1TaskBase.model_randomization = lambda self, n, g: {}
    try:
        compiled = tick_compile_enabled(cfg, "cuda:0", True) and arm != "shaken"
        tick = build_collector_tick(cfg, num_envs, "cuda", cuda_graph=True, compile=compiled)
        try:
            out = {"arm": arm, "compiled": compiled, **_measure(tick, warmup, ticks)}
            if arm == "shaken":
                torch.cuda.synchronize()
                out["physics_held_ctrl_ms_per_step"] = _physics_from_state(tick, ticks, shake=False)
                out["physics_new_ctrl_ms_per_step"] = _physics_from_state(tick, ticks, shake=True)
            elif arm != "nophys":
                torch.cuda.synchronize()
                physics = _physics_only(tick, ticks, False)
                out["physics_only_ms_per_tick"] = physics["ms_per_tick"]
            return out
        finally:
            tick.release()
            del tick
            torch.cuda.empty_cache()
    finally:
        MjWarpBackend._substeps, G1TaskBase.model_randomization = substeps, randomization


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--num-envs", type=int, default=4096)
    p.add_argument("--ticks", type=int, default=200)
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS))
    p.add_argument("--out", default=None)
    a = p.parse_args()
    if not torch.cuda.is_available():
        print("error: needs a CUDA device", file=sys.stderr)
        return 2
    round_robin(run_arm, a)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
