"""Cold mjlab env build on Warp's CPU device: every Warp module load with its seconds, whether it compiled,
and the step of the build that asked for it; the build's seconds, with duorl's Warp preload or without.

Run from the repository root, one process per measurement (a fresh kernel cache each time):
  PYTHONPATH=src .venv/bin/python benchmarks/scripts/mjlab_warp_preload_cpu.py --threads 0 --out a.json
  PYTHONPATH=src .venv/bin/python benchmarks/scripts/mjlab_warp_preload_cpu.py --threads 2 --out b.json
It sets WARP_CACHE_PATH to a new temporary folder before Warp is imported (the cache Warp 1.19 reads).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
import traceback

PHASES = ("_finish_init", "create_graph", "set_sensor_context", "expand_model_fields", "load_managers",
          "initialize", "reset", "step")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--task", default="Mjlab-Velocity-Flat-Unitree-G1")
    p.add_argument("--envs", type=int, default=4)
    p.add_argument("--threads", type=int, required=True, help="DUORL_WARP_COMPILE_THREADS (0: no preload)")
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    cache = tempfile.mkdtemp(prefix="warp-cache-")
    os.environ["WARP_CACHE_PATH"] = cache
    os.environ["DUORL_WARP_COMPILE_THREADS"] = str(a.threads)
    import torch
    from warp._src.context import Module

    from duorl.config.schema import TaskConfig
    from duorl.envs.mjlab.vec_env import build_vec_env
    from duorl.startup_phases import PHASES as STARTUP

    loads: list[dict] = []
    lock = threading.Lock()
    real = Module.load
    phase = {"now": "import"}

    def timed(self, device, block_dim=None, *args, **kwargs):
        had = (runtime_ctx(device), block_dim if block_dim is not None else self.options["block_dim"]) in self.execs
        t0 = time.time()
        out = real(self, device, block_dim, *args, **kwargs)
        if not had and out is not None:
            frames = [f.name for f in traceback.extract_stack()]
            where = next((f for f in reversed(frames) if f in PHASES), "?")
            with lock:
                loads.append({"module": self.name, "s": round(time.time() - t0, 3), "start": round(t0, 3),
                              "thread": threading.current_thread().name, "caller": where, "phase": phase["now"]})
        return out

    def runtime_ctx(device):
        import warp

        return warp.get_device(device).context

    Module.load = timed
    task_cfg = TaskConfig(name=f"mjlab:{a.task}")
    t0 = time.time()
    phase["now"] = "build"
    env = build_vec_env(a.task, task_cfg, a.envs, "cpu", seed=0)
    t_build = time.time()
    phase["now"] = "reset"
    env.reset()
    t_reset = time.time()
    phase["now"] = "step"
    for _ in range(a.steps):
        env.step(torch.zeros(a.envs, env.spec.action_dim))
    t_step = time.time()
    env.close()
    rows = [r for r in STARTUP.record()["phases"] if "warp" in r["name"]]
    out = {"task": a.task, "envs": a.envs, "threads": a.threads, "cores": os.cpu_count(),
           "build_s": round(t_build - t0, 2), "reset_s": round(t_reset - t_build, 2),
           "steps_s": round(t_step - t_reset, 2), "build_to_steps_s": round(t_step - t0, 2),
           "modules_loaded": len(loads), "sum_load_s": round(sum(x["s"] for x in loads), 2),
           "by_phase": {}, "loads": loads, "startup_phases": rows}
    for x in loads:
        key = f'{x["phase"]}/{x["caller"]}'
        d = out["by_phase"].setdefault(key, {"modules": 0, "s": 0.0})
        d["modules"] += 1
        d["s"] = round(d["s"] + x["s"], 3)
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
    print(json.dumps({k: v for k, v in out.items() if k not in ("loads", "startup_phases")}, indent=1))


if __name__ == "__main__":
    sys.exit(main())
