"""Where the time of one replayed collector tick goes, kernel by kernel (run on a GPU machine):

    python3 benchmarks/scripts/tick_profile.py [--task g1_walk_flat] [--num-envs 4096] [--ticks 20] [key=value ...]

Builds the collector's tick as `duorl bench collector` does (captured; sim.tick_compile resolved as in a
run), replays it, then records `--ticks` replays under torch.profiler (CUPTI traces the kernels of a
graph replay) and prints the kernels grouped by name: count per tick, total GPU microseconds per tick,
and the share of the tick. MuJoCo Warp's kernels carry their warp names; inductor's carry `triton_`;
a summary line per group (mujoco_warp, inductor, other) comes first.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys

import torch
from torch.profiler import ProfilerActivity, profile

from duorl.cli.bench.collector import build_collector_tick
from duorl.cli.configure import load_config
from duorl.config.switches import tick_compile_enabled


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--algo", default="sac")
    p.add_argument("--task", default="g1_walk_flat")
    p.add_argument("--num-envs", type=int, default=4096)
    p.add_argument("--ticks", type=int, default=20)
    p.add_argument("--top", type=int, default=40)
    p.add_argument("--out", default=None, help="also write the grouped table as JSON here")
    p.add_argument("overrides", nargs="*")
    a = p.parse_args()
    if not torch.cuda.is_available():
        print("error: needs a CUDA device", file=sys.stderr)
        return 2
    cfg = load_config(a.algo, a.task, "mjwarp", ["training.devices=[0]", *a.overrides])
    compiled = tick_compile_enabled(cfg, "cuda:0", True)
    tick = build_collector_tick(cfg, a.num_envs, "cuda", cuda_graph=True, compile=compiled)
    tick.run(0, 5)  # eager first tick, capture, replays
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        tick.run(5, a.ticks)
        torch.cuda.synchronize()
    by_name: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            row = by_name[ev.name]
            row[0] += 1
            row[1] += ev.device_time_total if hasattr(ev, "device_time_total") else ev.cuda_time_total
    total = sum(v[1] for v in by_name.values())
    rows = sorted(by_name.items(), key=lambda kv: -kv[1][1])
    print(f"task={a.task} envs={a.num_envs} compiled={compiled} ticks={a.ticks}")
    print(f"kernels per tick: {sum(v[0] for v in by_name.values()) / a.ticks:.0f}; "
          f"GPU busy per tick: {total / a.ticks / 1e3:.3f} ms")
    groups: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
    for name, (count, us) in rows:
        kind = ("mujoco_warp" if name.endswith("_cuda_kernel_forward")
                else "inductor" if name.startswith("triton_") else "other")
        groups[kind][0] += count
        groups[kind][1] += us
    for kind, (count, us) in sorted(groups.items()):
        print(f"{kind:12s} {count / a.ticks:7.1f} kernels per tick {us / a.ticks / 1e3:7.3f} ms per tick")
    table = []
    for name, (count, us) in rows[: a.top]:
        table.append({"kernel": name[:120], "per_tick": count / a.ticks, "us_per_tick": us / a.ticks,
                      "share": us / total})
        print(f"{us / a.ticks:9.1f} us {count / a.ticks:6.1f}x {100 * us / total:5.1f}%  {name[:100]}")
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            json.dump({"task": a.task, "num_envs": a.num_envs, "compiled": compiled, "ticks": a.ticks,
                       "gpu": torch.cuda.get_device_name(0), "kernels": table,
                       "groups": {k: {"per_tick": c / a.ticks, "us_per_tick": u / a.ticks}
                                  for k, (c, u) in groups.items()}}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
