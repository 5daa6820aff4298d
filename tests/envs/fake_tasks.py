"""Task factories for the task-source tests, reached by import path (`--task tests.envs.fake_tasks:NAME`):
one that works and one for each way a user's factory or task can break the Task contract; a stand-in for
duorl.envs.mjlab (installed with monkeypatch.setitem(sys.modules, ...)); a fake installed distribution."""

from __future__ import annotations

import dataclasses
import types
from pathlib import Path

import torch

from duorl.config.errors import InputRefused
from duorl.config.schema import TaskConfig
from duorl.envs.base import EnvSpec
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


def fake_distribution(site: Path, name: str, entry_points: dict[str, str]) -> None:
    """An installed distribution as importlib.metadata finds it once `site` is on sys.path:
    NAME-1.0.dist-info with these `duorl.tasks` entry points."""
    info = site / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    lines = "".join(f"{k} = {v}\n" for k, v in entry_points.items())
    (info / "entry_points.txt").write_text(f"[duorl.tasks]\n{lines}")


MJLAB_IDS = ["Mjlab-Cartpole-Swingup", "Mjlab-Cartpole-Balance", "Mjlab-Velocity-Flat-Unitree-G1"]


def fake_mjlab_module(calls: list, installed: bool = True) -> types.ModuleType:
    """duorl.envs.mjlab as its contract states it (PREFIX, check_installed, task_ids, task_spec,
    make_vec_env); make_vec_env records its arguments in `calls`."""
    fake = types.ModuleType("duorl.envs.mjlab")
    fake.PREFIX = "mjlab:"  # type: ignore[attr-defined]

    def check_installed() -> None:
        if not installed:
            raise InputRefused("mjlab is not installed. Fix: pip install 'duorl[mjlab]'")

    def task_spec(task_id: str, cfg: TaskConfig) -> EnvSpec:
        return EnvSpec(task=cfg.name, actor_obs_dim=5, critic_obs_dim=7, action_dim=1, max_episode_steps=10,
                       control_dt=0.02)

    def make_vec_env(task_id, task_cfg, num_envs, device, seed, play=False, render=False,  # type: ignore[no-untyped-def]
                     staged_step=None):
        calls.append((task_id, task_cfg.name, num_envs, device, seed, play, render))
        return "a VecEnv"

    fake.check_installed = check_installed  # type: ignore[attr-defined]
    fake.task_ids = lambda: list(MJLAB_IDS)  # type: ignore[attr-defined]
    fake.task_spec = task_spec  # type: ignore[attr-defined]
    fake.make_vec_env = make_vec_env  # type: ignore[attr-defined]
    return fake
