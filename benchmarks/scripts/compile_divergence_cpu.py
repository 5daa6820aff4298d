"""Why a compiled and a plain env part along a trajectory but agree step by step (MuJoCo Warp's float32
physics on warp's CPU device, g1_motion_tracking, 32 envs, 5-step episodes):

    .venv/bin/python benchmarks/scripts/compile_divergence_cpu.py   # output: benchmarks/2026-11-29_cpu_probes/compile_divergence_cpu.txt

1. Along a trajectory: per step, the largest observation difference between a compiled and a plain env
   (same seed, same actions), and the largest joint-velocity difference *before* that step.
2. From the same state (tests/envs/compile_util.py): the compiled pieces against the plain ones.
"""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/ helpers

from duorl.cli.configure import load_config  # noqa: E402
from duorl.envs.registry import make_vec_env  # noqa: E402
from tests.envs.compile_util import step_compiled_vs_plain  # noqa: E402

N, STEPS = 32, 12


def main() -> None:
    cfg = load_config("sac", "g1_motion_tracking", "mjwarp", ["task.max_episode_steps=5", "training.devices=[cpu]"])
    plain = make_vec_env(cfg.task, cfg.sim, N, "cpu", 3, compile=False)
    fused = make_vec_env(cfg.task, cfg.sim, N, "cpu", 3, compile=True)
    plain.reset(), fused.reset()
    g = torch.Generator().manual_seed(0)
    print("1. trajectories")
    for i in range(STEPS):
        before = (plain.backend.qvel - fused.backend.qvel).abs().max().item()
        a = torch.rand(N, plain.spec.action_dim, generator=g) * 2 - 1
        r0, r1 = plain.step(a), fused.step(a)
        final = (r0[4]["final_obs"]["actor"] - r1[4]["final_obs"]["actor"]).abs().max(dim=1).values
        print(f"step {i}: final obs max diff {final.max().item():.2e} (env {int(final.argmax())}), "
              f"qvel diff before the step {before:.2e}, envs done {int((r0[2] | r0[3]).sum())}")
    print("2. from the same state, step by step (atol/rtol 1e-4)")
    env = make_vec_env(cfg.task, cfg.sim, N, "cpu", 3, compile=True)
    env.reset()
    g = torch.Generator().manual_seed(0)
    done = 0
    for _ in range(STEPS):
        done += step_compiled_vs_plain(env, torch.rand(N, env.spec.action_dim, generator=g) * 2 - 1)[0]
    print(f"all {STEPS} steps agree; envs reset along the way: {done}")


if __name__ == "__main__":
    main()
