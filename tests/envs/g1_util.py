"""Helpers for the G1 tests: small CPU envs of a chosen task, and a standing controller."""

from __future__ import annotations

import torch

from duorl.envs.backends.mujoco_cpu import MujocoBackend
from duorl.envs.vec_env import TaskVecEnv


def cpu_env(task, num_envs: int = 4, seed: int = 0, nthread: int = 1) -> TaskVecEnv:
    """`task` (an unbound G1 task object) on the mujoco backend."""
    backend = MujocoBackend(task.mj_model(), num_envs, task.substeps, nthread=nthread)
    return TaskVecEnv(task, backend, seed=seed)


def pitch_of(qpos: torch.Tensor) -> torch.Tensor:
    w, x, y, z = qpos[:, 3:7].unbind(-1)
    return torch.asin((2.0 * (w * y - z * x)).clamp(-1.0, 1.0))


def standing_controller(env: TaskVecEnv) -> torch.Tensor:
    """Actions that keep the G1 standing: stiffen every joint about the standing pose (4x the PD
    gain, through the action) and lean the ankles against the pelvis' pitch (an ankle strategy).
    Found by a small gain search; with zero actions the robot falls forward within ~1.5 s."""
    task, sim = env.task, env.backend
    qpos, qvel = sim.qpos.float(), sim.qvel.float()
    err = (qpos[:, 7:] - task.q_default) / task.action_scale
    a = -4.0 * err
    lean = 6.0 * pitch_of(qpos) + 0.3 * qvel[:, 4]
    for ankle in (4, 10):  # left/right ankle pitch
        a[:, ankle] += lean / task.action_scale[ankle]
    return a.clamp(-1.0, 1.0)

