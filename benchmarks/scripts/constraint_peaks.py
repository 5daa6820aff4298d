"""How many constraint rows and contacts g1_walk_flat's worlds reach, against MuJoCo Warp's capacities (GPU):

    python3 benchmarks/scripts/constraint_peaks.py [--num-envs 4096] [--ticks 1500] [--out peaks.json]

The collector's tick (captured, uncompiled) steps the worlds under the untrained actor, whose exploration
noise makes robots shake, fall and lie on the floor: the contact-rich states. After every physics
substep, inside the captured tick, device tensors keep the largest `nefc` (constraint rows) each world
reached and the largest total `nacon` (active contacts, a pool that all worlds share); MuJoCo Warp's
per-world `overflow` bits (nefc > njmax, too many Jacobian non-zeros, contact pool full) are OR-ed in.
Printed: those peaks against `njmax`, `njmax_nnz` and `naconmax`, and quantiles of the per-world peaks.
"""

from __future__ import annotations

import argparse
import functools
import operator
import sys
from typing import Any

import torch

from duorl.cli.bench.collector import build_collector_tick
from duorl.cli.bench.report import emit
from duorl.cli.configure import load_config
from duorl.envs.backends.mjwarp import MjWarpBackend


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--num-envs", type=int, default=4096)
    p.add_argument("--ticks", type=int, default=1500)
    p.add_argument("--out", default=None)
    a = p.parse_args()
    if not torch.cuda.is_available():
        print("error: needs a CUDA device", file=sys.stderr)
        return 2
    import warp as wp

    peaks: dict[str, Any] = {}
    substeps = MjWarpBackend._substeps

    def recording(self: MjWarpBackend) -> None:
        d = self._d
        if not peaks:
            peaks["nefc"] = torch.zeros(self.num_envs, dtype=torch.int32, device=self.device)
            peaks["nacon"] = torch.zeros(1, dtype=torch.int32, device=self.device)
            peaks["overflow"] = torch.zeros(self.num_envs, dtype=torch.int32, device=self.device)
        for _ in range(self.substeps):
            self._mjw.step(self._m, d)
            peaks["nefc"].copy_(torch.maximum(peaks["nefc"], wp.to_torch(d.nefc)))
            peaks["nacon"].copy_(torch.maximum(peaks["nacon"], wp.to_torch(d.nacon)))
        peaks["overflow"].bitwise_or_(wp.to_torch(d.overflow))

    MjWarpBackend._substeps = recording
    try:
        cfg = load_config("sac", "g1_walk_flat", "mjwarp", ["training.devices=[0]"])
        tick = build_collector_tick(cfg, a.num_envs, "cuda", cuda_graph=True, compile=False)
        tick.run(0, a.ticks)
        torch.cuda.synchronize()
        d = tick.env.backend._d
        nefc = peaks["nefc"].float().cpu()
        q = torch.quantile(nefc, torch.tensor([0.5, 0.9, 0.99, 0.999]))
        overflow = peaks["overflow"].cpu()
        result = {
            "command": " ".join(sys.argv), "gpu": torch.cuda.get_device_name(0), "num_envs": a.num_envs,
            "ticks": a.ticks, "substeps_per_tick": tick.env.backend.substeps,
            "njmax": int(d.njmax), "njmax_nnz": int(d.njmax_nnz), "naconmax": int(d.naconmax),
            "peak_nefc_max": int(nefc.max()), "peak_nefc_quantiles_50_90_99_999": [round(float(v), 1) for v in q],
            "peak_nacon_total": int(peaks["nacon"].item()),
            "peak_nacon_per_world": round(int(peaks["nacon"].item()) / a.num_envs, 2),
            "worlds_with_overflow_bits": int((overflow != 0).sum()),
            "overflow_bits_seen": functools.reduce(operator.or_, set(overflow.tolist()), 0),
        }
        tick.release()
    finally:
        MjWarpBackend._substeps = substeps
    emit(result, a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
