"""How many constraint-solver iterations MuJoCo Warp's worlds need in g1_walk_flat (CPU, no GPU needed):

    python benchmarks/scripts/solver_iterations_cpu.py [NUM_ENVS] [STEPS] [zero|rand|smooth]

Counts `solver_niter` (MuJoCo Warp's per-world iteration counter) after every physics substep and prints,
over the last three quarters of the steps: the mean per world, the per-substep maximum over worlds (what
a conditional solver loop would have to run), and quantiles. Output of the committed run:
benchmarks/2026-11-29_cpu_probes/solver_iterations_cpu.txt. Why it matters: benchmarks/2026-11-29_tick_profile_h200/README.md.
"""

from __future__ import annotations

import sys

import torch
import warp as wp

from duorl.cli.configure import load_config
from duorl.envs.registry import make_vec_env


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 256
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 60
    mode = sys.argv[3] if len(sys.argv) > 3 else "smooth"
    cfg = load_config("sac", "g1_walk_flat", "mjwarp", ["training.devices=[cpu]"])
    env = make_vec_env(cfg.task, cfg.sim, n, "cpu", seed=0)
    env.reset()
    backend = env.backend
    niter = wp.to_torch(backend._d.solver_niter)
    step, counts = backend._mjw.step, []

    def counted(m, d) -> None:
        step(m, d)
        counts.append(niter.clone())

    backend._mjw.step = counted
    g = torch.Generator().manual_seed(0)
    a = torch.zeros(n, env.spec.action_dim)
    for _ in range(steps):
        if mode == "rand":
            a = torch.rand(n, env.spec.action_dim, generator=g) * 2 - 1
        elif mode == "smooth":
            a = (0.9 * a + 0.1 * (torch.rand(n, env.spec.action_dim, generator=g) * 2 - 1)).clamp(-1, 1)
        env.step(a)
    r = torch.stack(counts[len(counts) // 4:]).float()
    cap = backend._m.opt.iterations
    worst = r.max(dim=1).values
    print(f"{mode}: {n} worlds, {steps} control steps, iterations cap {cap}")
    print(f"  mean iterations per world and substep {r.mean().item():.2f}")
    print(f"  most in any world, per substep: mean {worst.mean().item():.2f}, "
          f"at the cap in {100 * (worst >= cap).float().mean().item():.1f}% of substeps")
    print("  per-world quantiles (0.5, 0.9, 0.99, 0.999):",
          [round(torch.quantile(r.flatten(), q).item(), 1) for q in (0.5, 0.9, 0.99, 0.999)])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
