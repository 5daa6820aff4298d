"""A small mjlab task in its own package: a torque-limited pendulum that swings up and stays up.

Importing this module registers `Duorl-Example-Pendulum` in mjlab's task registry; the package's entry
point (pyproject.toml, group `mjlab.tasks`) is how mjlab, and duorl through it, imports it. Everything is
mjlab's own API: an entity from the MJCF beside this file, observation, reward, event and termination
terms, and a runner configuration for mjlab's own trainer.

  observations  cos and sin of the pole angle (0 = upright) and its rate: 3 numbers, actor and critic
  action        the hinge torque (mjlab's JointEffortAction, scale 1: duorl's [-1, 1] spans the motor)
  reward        `upright`: (1 + cos angle) / 2 per step (mjlab scales by the 0.02 s step); weight 1
  terminations  `spinning` (|rate| > 12 rad/s) and the 4 s time-out
  episodes      start hanging down (angle pi +- 0.3 rad)
"""

from __future__ import annotations

import math
from pathlib import Path

import mujoco
import torch

from mjlab.actuator.xml_actuator import XmlActuatorCfg
from mjlab.entity import EntityArticulationInfoCfg, EntityCfg
from mjlab.envs import ManagerBasedRlEnvCfg
from mjlab.envs.mdp import joint_vel_rel, reset_joints_by_offset, time_out
from mjlab.envs.mdp.actions import JointEffortActionCfg
from mjlab.managers.event_manager import EventTermCfg
from mjlab.managers.observation_manager import ObservationGroupCfg, ObservationTermCfg
from mjlab.managers.reward_manager import RewardTermCfg
from mjlab.managers.scene_entity_config import SceneEntityCfg
from mjlab.managers.termination_manager import TerminationTermCfg
from mjlab.rl import RslRlOnPolicyRunnerCfg
from mjlab.scene import SceneCfg
from mjlab.sim import MujocoCfg, SimulationCfg
from mjlab.tasks.registry import register_mjlab_task
from mjlab.terrains import TerrainEntityCfg

TASK_ID = "Duorl-Example-Pendulum"
XML = Path(__file__).parent / "pendulum.xml"
HINGE = SceneEntityCfg("pendulum", joint_names=("hinge",))
MAX_RATE = 12.0  # rad/s


def _angle(env, asset_cfg: SceneEntityCfg) -> torch.Tensor:
    return env.scene[asset_cfg.name].data.joint_pos[:, asset_cfg.joint_ids].squeeze(-1)


def angle_cos_sin(env, asset_cfg: SceneEntityCfg = HINGE) -> torch.Tensor:
    a = _angle(env, asset_cfg)
    return torch.stack([torch.cos(a), torch.sin(a)], dim=-1)


def upright(env, asset_cfg: SceneEntityCfg = HINGE) -> torch.Tensor:
    return (1.0 + torch.cos(_angle(env, asset_cfg))) / 2.0


def spinning(env, asset_cfg: SceneEntityCfg = HINGE) -> torch.Tensor:
    rate = env.scene[asset_cfg.name].data.joint_vel[:, asset_cfg.joint_ids].squeeze(-1)
    return rate.abs() > MAX_RATE


def pendulum_env_cfg(play: bool = False) -> ManagerBasedRlEnvCfg:
    entity = EntityCfg(
        spec_fn=lambda: mujoco.MjSpec.from_file(str(XML)),
        articulation=EntityArticulationInfoCfg(actuators=(XmlActuatorCfg(target_names_expr=("hinge",)),)),
        init_state=EntityCfg.InitialStateCfg(pos=(0.0, 0.0, 0.0), joint_pos={"hinge": math.pi}, joint_vel={".*": 0.0}),
    )
    terms = {
        "angle": ObservationTermCfg(func=angle_cos_sin, params={"asset_cfg": HINGE}),
        "rate": ObservationTermCfg(func=joint_vel_rel, params={"asset_cfg": HINGE}),
    }
    return ManagerBasedRlEnvCfg(
        scene=SceneCfg(terrain=TerrainEntityCfg(terrain_type="plane"), entities={"pendulum": entity}, num_envs=1,
                       env_spacing=2.0),
        observations={"actor": ObservationGroupCfg(dict(terms)), "critic": ObservationGroupCfg(dict(terms))},
        actions={"torque": JointEffortActionCfg(entity_name="pendulum", actuator_names=("hinge",), scale=1.0)},
        events={"reset_hinge": EventTermCfg(func=reset_joints_by_offset, mode="reset", params={
            "position_range": (-0.3, 0.3), "velocity_range": (-0.1, 0.1), "asset_cfg": HINGE})},
        rewards={"upright": RewardTermCfg(func=upright, weight=1.0, params={"asset_cfg": HINGE})},
        terminations={"time_out": TerminationTermCfg(func=time_out, time_out=True),
                      "spinning": TerminationTermCfg(func=spinning, params={"asset_cfg": HINGE})},
        sim=SimulationCfg(mujoco=MujocoCfg(timestep=0.01, disableflags=("contact",))),
        decimation=2,
        episode_length_s=4.0,
    )


register_mjlab_task(
    task_id=TASK_ID,
    env_cfg=pendulum_env_cfg(),
    play_env_cfg=pendulum_env_cfg(play=True),
    rl_cfg=RslRlOnPolicyRunnerCfg(experiment_name="duorl_example_pendulum"),
)
