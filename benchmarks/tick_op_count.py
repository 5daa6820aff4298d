"""Count the aten ops (about one GPU kernel each) of one g1_walk_flat collector tick and of its parts, on
the CPU: the non-physics share of a captured tick is roughly these ops times a few microseconds each.

    .venv/bin/python benchmarks/tick_op_count.py
"""

import collections

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from duorl.bench.collector import build_collector_tick
from duorl.config.load import load_config


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
        "task.reset (every tick, masked)": lambda: task.reset(torch.zeros(64, dtype=torch.bool), env.generator),
        "task.reward": lambda: task.reward(env.backend),
        "task.observe (twice a tick)": lambda: task.observe(env.backend),
        "task.terminated": lambda: task.terminated(env.backend),
        "task.metrics": lambda: task.metrics(env.backend),
    }
    for name, fn in parts.items():
        print(f"{name}: {count(fn)} aten ops")


if __name__ == "__main__":
    main()
