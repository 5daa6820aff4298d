"""The factories of duorl's builtin tasks (envs.task_sources.BUILTIN names them by import path):
TaskConfig -> an unbound Task. The G1 modules load only when a G1 task is asked for."""

from __future__ import annotations

from duorl.config.schema import TaskConfig
from duorl.envs.tasks.base import Task


def pendulum_swingup(cfg: TaskConfig) -> Task:
    from duorl.envs.tasks.pendulum import PendulumSwingup

    return PendulumSwingup(max_episode_steps=cfg.max_episode_steps)


def g1_walk_flat(cfg: TaskConfig) -> Task:
    from duorl.envs.tasks.g1_walk import G1WalkFlat

    curriculum = {} if cfg.penalty_curriculum is None else {"penalty_curriculum": cfg.penalty_curriculum}
    return G1WalkFlat(max_episode_steps=cfg.max_episode_steps, robot_xml=cfg.robot_xml,
                      action_range=cfg.action_range, **curriculum)


def g1_motion_tracking(cfg: TaskConfig) -> Task:
    from duorl.envs.tasks.g1_tracking import G1MotionTracking

    return G1MotionTracking(max_episode_steps=cfg.max_episode_steps, robot_xml=cfg.robot_xml,
                            motion_file=cfg.motion_file, action_range=cfg.action_range)
