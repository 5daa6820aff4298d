"""Task factories for the task-source tests, reached by import path (`--task tests.envs.fake_tasks:NAME`):
one that works and one for each way a user's factory or task can break the Task contract."""

from __future__ import annotations

import dataclasses

import torch

from duorl.config.schema import TaskConfig
from duorl.envs.tasks.pendulum import PendulumSwingup

NOT_CALLABLE = 3


def pendulum(cfg: TaskConfig) -> PendulumSwingup:
    """A working task: the builtin pendulum, reached by import path."""
    return PendulumSwingup(max_episode_steps=cfg.max_episode_steps)


def returns_none(cfg: TaskConfig) -> None:
    return None


def raises(cfg: TaskConfig) -> PendulumSwingup:
    raise RuntimeError("no robot model here")


def zero_action(cfg: TaskConfig) -> PendulumSwingup:
    task = PendulumSwingup()
    task.spec = dataclasses.replace(task.spec, action_dim=0)
    return task


class _IntObs(PendulumSwingup):
    def observe(self, sim):  # type: ignore[no-untyped-def]
        return {k: (v * 100).to(torch.int64) for k, v in super().observe(sim).items()}


def int_obs(cfg: TaskConfig) -> PendulumSwingup:
    return _IntObs()


class _WideObs(PendulumSwingup):
    def observe(self, sim):  # type: ignore[no-untyped-def]
        return {k: torch.cat((v, v[:, :1]), dim=1) for k, v in super().observe(sim).items()}


def wide_obs(cfg: TaskConfig) -> PendulumSwingup:
    """Observes 4 numbers where its spec says 3."""
    return _WideObs()
