"""What exploration noise alone costs in g1_walk_flat's penalties, under the two action ranges.

A fixed standing controller stands in for the policy (tests/envs/g1_util.py: stiff joints about the
standing pose and an ankle strategy; it asks for the same joint targets under either action range),
and every step adds SAC-style noise to it, tanh(atanh(a) + sigma * eps), drawn afresh per joint and
step, as the collector's exploring envs do. Penalties at full weight (task.penalty_curriculum=off); the
action-rate penalty reads the policy's own output, not the noise, so it is not listed. A stand-still
command for every env, no reset noise or randomisation. Reported per step, as the training log's Task/rew_<term> (weight * dt * term),
over N envs and the steps after the first second, plus the fraction of envs that fell at least once.

Why: in the H200 walking runs the exploring envs' penalties under `joint_limits` were about 10x those
of the deterministic envs (benchmarks/2026-11-29_g1_walk_fastsac_h200_10min_eval_envs/). If noise of
the size SAC keeps at the published target entropy (Policy/entropy near 0: sigma about 0.25 per joint)
reproduces them on a robot that does nothing else, the noise is what costs, and this table says how
small sigma must be under `joint_limits` to cost what `pd` costs at sigma 0.24.

    .venv/bin/python benchmarks/scripts/exploration_noise_penalty_cpu.py > benchmarks/2026-11-29_cpu_probes/exploration_noise_penalty_cpu.txt
"""

import argparse
import math
import sys
import time
from pathlib import Path

import torch

from duorl.envs.tasks.g1_walk import G1WalkFlat

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/ helpers
from tests.envs.g1_util import cpu_env, standing_controller  # noqa: E402

PENALTIES = ("rew_pose", "rew_ang_vel_xy", "rew_feet_ori", "rew_orientation", "rew_close_feet")


def tanh_gaussian_entropy(sigma: float, samples: int = 200_000) -> float:
    """Entropy (nats) of tanh(N(0, sigma^2)) per dimension: the Gaussian's plus E[log(1 - tanh(x)^2)]
    (the log-Jacobian of tanh; SAC's Policy/entropy is this summed over the action's dimensions)."""
    x = torch.randn(samples, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * sigma
    return 0.5 * math.log(2 * math.pi * math.e * sigma**2) + float(torch.log1p(-torch.tanh(x) ** 2).mean())


def measure(action_range: str, sigma: float, num_envs: int, steps: int, seed: int) -> dict[str, float]:
    # no reset noise and no randomisation: the controller alone keeps every env up (sigma 0)
    task = G1WalkFlat(randomize=False, reset_noise=False, penalty_curriculum="off", action_range=action_range)
    env = cpu_env(task, num_envs, seed=seed, nthread=0)
    names = env.spec.metric_names
    env.reset()
    gen = torch.Generator().manual_seed(seed + 1)
    sums = torch.zeros(len(names), dtype=torch.float64)
    count, fell = 0, torch.zeros(num_envs, dtype=torch.bool)
    warm = round(1.0 / env.spec.control_dt)
    for t in range(steps):
        env.task.command.zero_()  # stand still
        mean = torch.atanh(standing_controller(env).clamp(-0.995, 0.995))
        action = torch.tanh(mean + sigma * torch.randn(num_envs, env.spec.action_dim, generator=gen))
        _, _, terminated, _, info = env.step(action, torch.tanh(mean))
        fell |= terminated
        if t >= warm:
            sums += info["metrics"].double().sum(dim=0)
            count += num_envs
    env.close()
    out = {n: float(v) / count for n, v in zip(names, sums)}
    out["fell"] = float(fell.float().mean())
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--num-envs", type=int, default=32)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--sigmas", type=float, nargs="+", default=[0.0, 0.03, 0.06, 0.12, 0.24])
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    steps = round(a.seconds / 0.02)
    print(f"{a.num_envs} envs, {a.seconds:g} s each (statistics after the first 1 s), stand-still command, "
          "penalties at full weight; per step, as Task/rew_<term>")
    print(f"{'range':13s} {'sigma':>5s} {'H/dim':>6s} " + " ".join(f"{p[4:]:>11s}" for p in PENALTIES)
          + f" {'sum':>8s} {'fell':>5s}")
    t0 = time.perf_counter()
    for action_range in ("pd", "joint_limits"):
        for sigma in a.sigmas:
            r = measure(action_range, sigma, a.num_envs, steps, a.seed)
            h = tanh_gaussian_entropy(sigma) if sigma > 0 else float("-inf")
            total = sum(r[p] for p in PENALTIES)
            print(f"{action_range:13s} {sigma:5.2f} {h:6.2f} " + " ".join(f"{r[p]:11.4f}" for p in PENALTIES)
                  + f" {total:8.4f} {r['fell']:5.2f}", flush=True)
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
