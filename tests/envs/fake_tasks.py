"""Task factories for the task-source tests, reached by import path (`--task tests.envs.fake_tasks:NAME`):
one that works and one for each way a user's factory or task can break the Task contract; a stand-in for
duorl.envs.mjlab's contract (fake_mjlab, hide_mjlab: monkeypatched onto the real adapter); a fake installed
distribution."""

from __future__ import annotations

import dataclasses
from typing import Any
from pathlib import Path

import torch

from duorl.config.errors import InputRefused
from duorl.config.schema import TaskConfig, setting
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


@dataclasses.dataclass
class ReachConfig(TaskConfig):
    """A package task's own key (docs/tasks.md's worked example declares one the same way)."""

    target_range: float = setting(0.3, "reach_with_keys: half-width of the square targets are drawn from (m)", above=0)


def reach_with_keys(cfg: ReachConfig) -> PendulumSwingup:
    """A working task whose factory declares its keys (`config_class`); the key reaches the task."""
    task = PendulumSwingup(max_episode_steps=cfg.max_episode_steps)
    task.target_range = cfg.target_range  # type: ignore[attr-defined]
    return task


reach_with_keys.config_class = ReachConfig  # type: ignore[attr-defined]


def keys_not_a_dataclass(cfg: TaskConfig) -> PendulumSwingup:
    return PendulumSwingup()


keys_not_a_dataclass.config_class = dict  # type: ignore[attr-defined]


@dataclasses.dataclass
class _BareKeys(TaskConfig):
    gain: float = 1.0  # no setting(): no help, no bounds


def keys_without_help(cfg: TaskConfig) -> PendulumSwingup:
    return PendulumSwingup()


keys_without_help.config_class = _BareKeys  # type: ignore[attr-defined]


def fake_distribution(site: Path, name: str, entry_points: dict[str, str], group: str = "duorl.tasks") -> None:
    """An installed distribution as importlib.metadata finds it once `site` is on sys.path:
    NAME-1.0.dist-info with these entry points of `group` (the folder named as an installer names it, the
    name's dashes as underscores: importlib.metadata reads the part before the first dash as the name)."""
    info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    lines = "".join(f"{k} = {v}\n" for k, v in entry_points.items())
    (info / "entry_points.txt").write_text(f"[{group}]\n{lines}")


MJLAB_IDS = ["Mjlab-Cartpole-Swingup", "Mjlab-Cartpole-Balance", "Mjlab-Velocity-Flat-Unitree-G1"]


def fake_mjlab(monkeypatch: Any, calls: list, installed: bool = True) -> Any:
    """duorl.envs.mjlab's contract (check_installed, task_ids, task_rows, task_spec, make_vec_env) stood in by fakes on
    the real adapter module (monkeypatch: undone after the test); make_vec_env records its arguments in
    `calls`. `installed=False`: mjlab is missing. Returns the adapter."""
    import duorl.envs.mjlab as adapter

    def check_installed() -> None:
        if not installed:
            raise InputRefused("mjlab is not installed. Fix: pip install 'duorl[mjlab]'")

    def task_spec(task_id: str, cfg: TaskConfig) -> EnvSpec:
        return EnvSpec(task=cfg.name, actor_obs_dim=5, critic_obs_dim=7, action_dim=1, max_episode_steps=10,
                       control_dt=0.02)

    def make_vec_env(task_id, task_cfg, num_envs, device, seed, play=False, render=False,  # type: ignore[no-untyped-def]
                     staged_step=None, reset_graphs=None):
        calls.append((task_id, task_cfg.name, num_envs, device, seed, play, render))
        return "a VecEnv"

    def task_rows(refresh: bool = False) -> list:
        from duorl.envs.mjlab.listing import MjlabRow

        return [MjlabRow(f"mjlab:{i}", "mjlab", "trainable", 5, 7, 1) for i in MJLAB_IDS]

    monkeypatch.setattr(adapter, "check_installed", check_installed)
    monkeypatch.setattr(adapter, "task_rows", task_rows)
    monkeypatch.setattr(adapter, "task_ids", lambda: list(MJLAB_IDS))
    monkeypatch.setattr(adapter, "task_spec", task_spec)
    monkeypatch.setattr(adapter, "make_vec_env", make_vec_env)
    return adapter


def hide_mjlab(monkeypatch: Any) -> None:
    """mjlab as if it were not installed, whether it is or not (listings stay the same everywhere)."""
    fake_mjlab(monkeypatch, [], installed=False)
