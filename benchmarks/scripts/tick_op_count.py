"""Count the aten ops (about one GPU kernel each) of one g1_walk_flat collector tick and of its parts, on
the CPU: the non-physics share of a captured tick is roughly these ops times a few microseconds each.
Then, with torch.profiler, the top-level aten ops and compiled regions of one tick with the env's step
tensor code plain and compiled (sim.tick_compile; a dispatch-mode spy would make dynamo fall back to
eager, so the profiler counts here).

    .venv/bin/python benchmarks/scripts/tick_op_count.py        # output: benchmarks/2026-11-29_cpu_probes/tick_op_count_cpu.txt
"""

import collections

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from duorl.cli.bench.collector import build_collector_tick
from duorl.cli.configure import load_config
from duorl.envs.base import Uniforms


class Count(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: collections.Counter = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[str(func)] += 1
        return func(*args, **(kwargs or {}))


def count(fn) -> int:
    with Count() as c:
        fn()
    return sum(c.ops.values())


def main() -> None:
    cfg = load_config("sac", "g1_walk_flat", "mujoco", ["sim.nthread=1"])
    tick = build_collector_tick(cfg, 64, "cpu", cuda_graph=False)
    tick.run(0, 1)
    env, task = tick.env, tick.env.task
    parts = {
        "whole tick": lambda: tick.run(1, 1),
        "actor.explore": lambda: tick.actor.explore(tick.obs["actor"], tick.generator),
        "task.reset (every tick, masked)": lambda: task.reset(torch.zeros(64, dtype=torch.bool),
                                                              Uniforms(env._draw_uniforms())),
        "task.reward": lambda: task.reward(env.backend),
        "task.observe (twice a tick)": lambda: task.observe(env.backend),
        "task.terminated": lambda: task.terminated(env.backend),
        "task.metrics": lambda: task.metrics(env.backend),
    }
    for name, fn in parts.items():
        print(f"{name}: {count(fn)} aten ops")
    for compiled in (False, True):
        print(f"profiled tick, step tensor code {'compiled' if compiled else 'plain'}: {profiled(cfg, compiled)}")


def profiled(cfg, compiled: bool) -> str:
    from torch.profiler import ProfilerActivity, profile

    tick = build_collector_tick(cfg, 64, "cpu", cuda_graph=False, compile=compiled)
    tick.run(0, 3)  # compiles on the first tick
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        tick.run(3, 1)
    events = list(prof.events())
    top_level = sum(1 for e in events if e.name.startswith("aten::")
                    and (e.cpu_parent is None or not e.cpu_parent.name.startswith("aten::")))
    regions = sum(1 for e in events if e.name.startswith("Torch-Compiled Region"))
    return f"{top_level} top-level aten ops, {regions} compiled-region calls"


if __name__ == "__main__":
    main()
