"""duorl's builtin tasks, named once: each name with its factory, its keys and its first check.

A builtin task's shipped defaults are `defaults/NAME.yaml` beside this module (a test holds the names and
the files equal). A factory takes the task's keys (envs/tasks/keys.py) and returns an unbound Task; the G1
modules (torch, MuJoCo) load only when a G1 task is asked for, so this table is cheap to import.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from duorl.config.schema import TaskConfig
from duorl.envs.tasks.keys import G1TrackingConfig, G1WalkConfig, PendulumConfig

if TYPE_CHECKING:
    from duorl.envs.tasks.base import Task

DEFAULTS_DIR = Path(__file__).resolve().parent / "defaults"


def make_pendulum(cfg: PendulumConfig) -> Task:
    from duorl.envs.tasks.pendulum import PendulumSwingup

    return PendulumSwingup(max_episode_steps=cfg.max_episode_steps)


def make_g1_walk(cfg: G1WalkConfig) -> Task:
    from duorl.envs.tasks.g1_walk import G1WalkFlat

    curriculum = {} if cfg.penalty_curriculum is None else {"penalty_curriculum": cfg.penalty_curriculum}
    return G1WalkFlat(max_episode_steps=cfg.max_episode_steps, robot_xml=cfg.robot_xml,
                      action_range=cfg.action_range, **curriculum)


def make_g1_tracking(cfg: G1TrackingConfig) -> Task:
    from duorl.envs.tasks.g1_tracking import G1MotionTracking

    return G1MotionTracking(max_episode_steps=cfg.max_episode_steps, robot_xml=cfg.robot_xml,
                            motion_file=cfg.motion_file, action_range=cfg.action_range)


@dataclass(frozen=True)
class Builtin:
    """One builtin task. `factory`: its import path (`module:function`, the one mechanism that loads every
    Task source); `keys`: its dataclass of keys; `first_check`: the import path of its check of its inputs
    that runs first, before anything of the run exists (a reference clip: warnings returned, ConfigError
    raised), or None."""

    factory: str
    keys: type[TaskConfig]
    first_check: str | None = None


BUILTIN: dict[str, Builtin] = {
    "pendulum_swingup": Builtin(f"{__name__}:make_pendulum", PendulumConfig),
    "g1_walk_flat": Builtin(f"{__name__}:make_g1_walk", G1WalkConfig),
    "g1_motion_tracking": Builtin(f"{__name__}:make_g1_tracking", G1TrackingConfig,
                                  first_check="duorl.envs.motion.load:check_motion_file"),
}
# the --task default: the task a fresh checkout trains in minutes on a CPU
DEFAULT_TASK = "pendulum_swingup"
# `duorl bench`'s default: the humanoid the measured GPU workloads train (benchmarks/)
BENCH_TASK = "g1_walk_flat"


def defaults_of(name: str) -> Path:
    """The shipped YAML of the builtin task `name`."""
    return DEFAULTS_DIR / f"{name}.yaml"
