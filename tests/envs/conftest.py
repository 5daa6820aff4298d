"""Shared helpers for the envs tests (CPU by default)."""

from __future__ import annotations

import torch

from duorl.config.schema import SimConfig
from duorl.envs.task_sources import task_config
from duorl.envs.registry import make_vec_env


def pytest_configure(config):  # markers used only here; registered so --strict-markers stays happy
    config.addinivalue_line(
        "markers", "mjwarp_cpu: MuJoCo Warp on warp's CPU device; shares one module-scoped build"
    )


def mujoco_env(num_envs: int = 4, seed: int = 0, max_episode_steps=None, nan_guard: bool = True, nthread: int = 0):
    return make_vec_env(
        task_config("pendulum_swingup", max_episode_steps=max_episode_steps),
        SimConfig(name="mujoco", nthread=nthread),
        num_envs,
        "cpu",
        seed,
        nan_guard=nan_guard,
    )


def fixed_actions(steps: int, num_envs: int, seed: int = 123) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.rand(steps, num_envs, 1, generator=g) * 2.0 - 1.0
