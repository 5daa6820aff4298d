"""The first MuJoCo Warp step of a cold machine, with and without the parallel preload (envs/backends/warp_preload.py).

    python benchmarks/scripts/warp_preload_cpu.py OUT.json [PAIRS] [TASK] [WORKERS]

Each arm is a fresh interpreter with an empty Warp kernel cache (WARP_CACHE_PATH in a new temporary
directory): it builds TASK's env on MuJoCo Warp on warp's CPU device (4 worlds), resets it and times the env
build and the first step; "serial" turns the preload off (DUORL_WARP_COMPILE_THREADS=0: the first step
loads its modules one by one, as before), "preload" runs it on WORKERS threads. Pairs alternate the arms so that the machine's load
falls on both alike. Writes every arm's seconds and the medians to OUT.json and prints a table.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import torch
from duorl.cli.configure import load_config
from duorl.envs.backends import warp_loads
from duorl.envs.registry import make_vec_env
cfg = load_config("sac", sys.argv[2], "mjwarp", [])
t1 = time.perf_counter()
env = make_vec_env(cfg.task, cfg.sim, 4, "cpu", 0)
obs = env.reset()
t2 = time.perf_counter()
a = torch.zeros(4, env.spec.action_dim)
env.step(a, a)
t3 = time.perf_counter()
c = warp_loads.LOADS.counter()
import resource
ru = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"cpu_s": ru.ru_utime + ru.ru_stime, "imports_config_s": t1 - t0, "env_build_s": t2 - t1, "first_step_s": t3 - t2,
                  "build_to_first_step_done_s": t3 - t1, **c}))
"""


def arm(name: str, task: str, workers: str) -> dict:
    with tempfile.TemporaryDirectory() as cache:
        # serial: the preload off (the first step loads its modules one by one, as before the preload)
        env = dict(os.environ, WARP_CACHE_PATH=cache, DUORL_WARP_COMPILE_THREADS="0" if name == "serial" else workers)
        load = os.getloadavg()[0]
        t0 = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", CHILD, name, task], env=env, capture_output=True, text=True,
                             timeout=1200)
        wall = time.perf_counter() - t0
        if out.returncode != 0:
            raise SystemExit(f"{name} failed:\n{out.stderr[-3000:]}")
        row = json.loads(out.stdout.strip().splitlines()[-1])
        return {"arm": name, "process_wall_s": wall, "load_1min": load, **row}


def main() -> None:
    out_path = sys.argv[1]
    pairs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    task = sys.argv[3] if len(sys.argv) > 3 else "g1_walk_flat"
    workers = sys.argv[4] if len(sys.argv) > 4 else str(min(8, os.cpu_count() or 1))
    rows = []
    for i in range(pairs):
        for name in (("serial", "preload") if i % 2 == 0 else ("preload", "serial")):
            rows.append(arm(name, task, workers))
            r = rows[-1]
            print(f"{name:8s} build {r['env_build_s']:6.2f} s  first step {r['first_step_s']:6.2f} s  "
                  f"build..first step {r['build_to_first_step_done_s']:6.2f} s  modules {r['warp_modules']:.0f} "
                  f"compiled {r['warp_compiled']:.0f} ({r['warp_compile_s']:.1f} s summed)  cpu {r['cpu_s']:.1f} s  load {r['load_1min']:.1f}",
                  flush=True)
    med = {a: statistics.median(r["build_to_first_step_done_s"] for r in rows if r["arm"] == a) for a in ("serial", "preload")}
    summary = {"task": task, "pairs": pairs, "median_build_to_first_step_s": med,
               "ratio_preload_over_serial": med["preload"] / med["serial"], "cpu_count": os.cpu_count(), "workers": int(workers), "rows": rows}
    with open(out_path, "w") as f:
        json.dump(summary, f, indent=1)
    print(f"median env build + first step: serial {med['serial']:.2f} s, preload {med['preload']:.2f} s "
          f"(ratio {summary['ratio_preload_over_serial']:.3f}) on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
