"""SAC learns mjlab's cartpole swing-up through the real duo on the CPU (Warp's CPU device).

32 envs, episodes of 100 steps (5 s; mjlab's own are 50 s), all starting together hanging down: each batch
of 32 episodes ends every 100 ticks, and the one that ends at tick 399 (the fourth, played by the policy
of iterations 300-399) reaches the log at iteration 401, the last. The post-train play then runs 8
deterministic episodes of mjlab's play configuration with the final policy.

Measured on the 2-core dev VM (seed 1): returns per batch 0.78, 0.79, 1.65 and 2.86 (the final one; a
fifth batch, 100 iterations more, reached 3.41), play 2.79, the same numbers on every run; the test took
56 s alone and 247 s beside another worker's tests. A random policy (uniform actions) scores 0.38 per
episode, doing nothing 0.0002, a perfect swing-up and balance at most 5 (rewards <= 1 per step, which
mjlab scales by the 0.05 s step). Threshold: the final return and play's at least 2.0 and at least 4
times the random policy's, measured here (2.86 is 7.5 times 0.38).
"""

from __future__ import annotations

import json

import pytest
import torch

from tests.conftest import run_duorl

TASK = "Mjlab-Cartpole-Swingup"
EPISODE = 100
ENVS = 32
LEARN = [
    "training.devices=[cpu]", f"training.num_envs={ENVS}", f"task.max_episode_steps={EPISODE}",
    "algo.max_iterations=401", "algo.batch_size=256", "algo.updates_per_step=8", "algo.learning_starts=10",
    "algo.buffer_size=512", "algo.actor_lr=0.001", "algo.critic_lr=0.001", "algo.actor_hidden_dims=[64,64]",
    "algo.critic_hidden_dims=[64,64]", "algo.num_atoms=51",
    # per-step rewards in [0, 0.05], gamma 0.97: discounted returns in [0, 1.7]
    "algo.v_min=-0.5", "algo.v_max=2.0", "training.log_interval=20", "training.no_play=false",
]
RETURN_FLOOR = 2.0
RANDOM_FACTOR = 4.0


def _random_policy_return() -> float:
    """Mean return of one batch of episodes under uniform random actions, same task and length."""
    from duorl.config.schema import TaskConfig
    from duorl.envs import mjlab

    env = mjlab.make_vec_env(TASK, TaskConfig(name=f"mjlab:{TASK}", max_episode_steps=EPISODE), ENVS, "cpu", seed=123)
    env.reset()
    gen = torch.Generator().manual_seed(0)
    for _ in range(EPISODE):
        _, _, _, truncated, info = env.step(torch.rand(ENVS, 1, generator=gen) * 2 - 1)
    env.close()
    assert truncated.all()
    return float(info["episode_return"].mean())


@pytest.mark.slow
def test_sac_learns_mjlab_cartpole_swingup(tmp_path):
    random_return = _random_policy_return()
    run = tmp_path / "learn"
    r = run_duorl(run, *LEARN, task=f"mjlab:{TASK}", sim="mjwarp", timeout=900)
    assert r.returncode == 0, r.stderr[-4000:]
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    final_return = rows[-1]["Train/mean_episode_return"]
    play = json.loads((run / "run_summary.json").read_text())["play"]
    print(f"random {random_return:.3f}, final training episodes {final_return:.3f}, play {play['mean_return']:.3f}")
    for got in (final_return, play["mean_return"]):
        assert got >= RETURN_FLOOR and got >= RANDOM_FACTOR * random_return, (got, random_return)
