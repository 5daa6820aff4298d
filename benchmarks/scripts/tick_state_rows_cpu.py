"""How many constraint rows the worlds carry in a collector tick vs in the physics alone (CPU, MuJoCo C):

    python3 benchmarks/scripts/tick_state_rows_cpu.py [--num-envs 256] [--steps 60] > benchmarks/2026-11-30_cpu_probes/tick_state_rows_cpu.txt

The H200 timings (benchmarks/2026-11-30_collector_capacity_h200/) put the physics of a g1_walk_flat tick
at about 10 ms, while the same 4 substeps alone from the tick's state take 7.5 ms holding the controls
and 8.1 ms with new random controls every step. The solver's work per world grows with its constraint
rows (a robot on both feet: about 113), so this counts them in three phases, on the CPU backend with
the same model: (1) `--steps` collector ticks under the untrained actor (its terminations reset fallen
robots to standing); (2) from there, `--steps` physics steps holding the last controls; (3) `--steps`
physics steps with new uniform random actions in [-1, 1] each step (no resets in (2) and (3)). After
every step `nefc` is read for every world (mj_forward on its state) and the mean and quantiles printed.
"""

from __future__ import annotations

import argparse

import mujoco
import numpy as np
import torch

from duorl.cli.bench.collector import build_collector_tick
from duorl.cli.configure import load_config
from duorl.envs.backends.mujoco_cpu import _FULLPHYSICS


def rows(backend, model: mujoco.MjModel, data: mujoco.MjData) -> np.ndarray:
    """nefc of every world's current state."""
    out = np.empty(backend.num_envs)
    for i, state in enumerate(backend.state.numpy()):
        mujoco.mj_setState(model, data, state, _FULLPHYSICS)
        mujoco.mj_forward(model, data)
        out[i] = data.nefc
    return out


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--num-envs", type=int, default=256)
    p.add_argument("--steps", type=int, default=60)
    a = p.parse_args()
    cfg = load_config("sac", "g1_walk_flat", "mujoco", ["sim.nthread=2"])
    tick = build_collector_tick(cfg, a.num_envs, "cpu", cuda_graph=False)
    env, b = tick.env, tick.env.backend
    model = env.task.mj_model()
    data = mujoco.MjData(model)
    gen = torch.Generator().manual_seed(0)

    def report(name: str, per_step: list[np.ndarray]) -> None:
        x = np.concatenate(per_step[len(per_step) // 3:])  # the last two thirds
        q = np.quantile(x, [0.1, 0.5, 0.9])
        print(f"{name:38s} mean {x.mean():6.1f}  p10 {q[0]:5.0f}  median {q[1]:5.0f}  p90 {q[2]:5.0f}  "
              f"share of worlds >= 100 rows {np.mean(x >= 100):.2f}", flush=True)

    ticks = []
    for k in range(a.steps):
        tick.run(k, 1)
        ticks.append(rows(b, model, data))
    report("(1) collector ticks (resets on)", ticks)
    held_ctrl = env.task._ctrl.clone()
    held = []
    for _ in range(a.steps):
        b.step(held_ctrl)
        held.append(rows(b, model, data))
    report("(2) physics alone, controls held", held)
    shaken = []
    for _ in range(a.steps):
        actions = torch.rand(a.num_envs, env.spec.action_dim, generator=gen) * 2 - 1
        b.step(env.task.apply_action(actions))
        shaken.append(rows(b, model, data))
    report("(3) physics alone, new random controls", shaken)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
