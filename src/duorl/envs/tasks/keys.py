"""The `task.*` keys of duorl's own task families: one dataclass each, extending config.schema.TaskConfig
(the keys every task reads) with the family's own, each declared with `setting(default, help, ...)` like
every other key. A run's Config holds its task's dataclass, so a key the task does not declare is refused
naming the task (config/load.py), and `duorl config --keys` lists each task's keys under its name.

Light on purpose (the schema only, no torch, no simulator): the entry layer reads these to load a
configuration, and the spawned collector unpickles them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from duorl.config.schema import TaskConfig, setting

ACTION_RANGES = ("pd", "joint_limits")  # task.action_range (envs/tasks/g1_common.py maps them)
PENALTY_CURRICULA = ("ppo", "fastsac", "off")  # task.penalty_curriculum (envs/tasks/g1_walk.py's schedules)


@dataclass
class PendulumConfig(TaskConfig):
    """The swing-up pendulum reads only the keys every task reads."""


@dataclass
class G1Config(TaskConfig):
    """What both G1 tasks read: the model and what an action means."""

    robot_xml: Optional[str] = setting(
        None, "G1 tasks: the model file; null = DUORL_G1_XML, an installed mjlab, or the cache of duorl assets g1",
        free_form=True, path=True, allowed="null or a path")
    # "pd" is mjlab's choice; "joint_limits" the published FastSAC G1 actor's scaling
    action_range: str = setting(
        "pd", "G1 tasks: what an action of +-1 means: pd = +-0.25 * effort / kp about the standing pose, "
              "joint_limits = up to the joint limit farther from the pose", choices=ACTION_RANGES)


@dataclass
class G1WalkConfig(G1Config):
    """The G1 walking task: the G1 keys and its penalty curriculum."""

    # the task's default, ppo, is holosoma's PPO G1 schedule and measured best here (envs/tasks/g1_walk.py)
    penalty_curriculum: Optional[str] = setting(
        None, "g1_walk_flat: penalty curriculum, ppo (holosoma's PPO G1 schedule), fastsac (their FastSAC G1 "
              "schedule) or off; null = the task's default (ppo)", choices=PENALTY_CURRICULA)


@dataclass
class G1TrackingConfig(G1Config):
    """The G1 motion-tracking task: the G1 keys and its reference clip."""

    motion_file: Optional[str] = setting(
        None, "g1_motion_tracking: reference clip (.npz or .csv, docs/motion.md); null = the synthetic clip",
        free_form=True, path=True, allowed="null or a path")
