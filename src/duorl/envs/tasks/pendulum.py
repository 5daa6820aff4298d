"""`pendulum_swingup`: swing a torque-limited rod up from hanging and balance it (assets/pendulum.xml).

theta = qpos[0], 0 upright, pi hanging. The motor's 2 N m cannot hold the rod against gravity past
about 24 degrees from hanging, so a policy must pump energy and swing up, as in Gym's Pendulum.
Reward per step (1 + cos theta) / 2 - 0.001 u^2 (u in N m): ~1 upright, ~0 hanging, so a 200-step
episode that swings up and balances scores well over 150 and one that never swings up near 0.
"""

from __future__ import annotations

import math
from importlib import resources
from typing import Optional

import mujoco
import torch

from duorl.envs.backends.base import Backend
from duorl.envs.base import EnvSpec, Obs, Uniforms

NAME = "pendulum_swingup"
MAX_TORQUE = 2.0  # N m, the motor's ctrlrange
PHYSICS_DT = 0.01  # the MJCF's option timestep
SUBSTEPS = 5  # control dt 0.05 s, as Gym's Pendulum
DEFAULT_EPISODE_STEPS = 200
VEL_SCALE = 1.0 / 8.0  # brings |thdot| (a few to ~10 rad/s) to about unit scale
CTRL_COST = 0.001
RESET_ANGLE_NOISE = 0.1  # rad, uniform, around hanging
RESET_VEL_NOISE = 0.1  # rad/s, uniform


def model_path() -> str:
    return str(resources.files("duorl.envs") / "assets" / "pendulum.xml")


class PendulumSwingup:
    """The swing-up pendulum task (see module docstring); implements `tasks.base.Task`."""

    substeps = SUBSTEPS
    uniforms_per_step = 2  # reset(): angle and velocity noise

    def __init__(self, max_episode_steps: Optional[int] = None) -> None:
        steps = DEFAULT_EPISODE_STEPS if max_episode_steps is None else int(max_episode_steps)
        if steps < 1:
            raise ValueError(f"task.max_episode_steps must be >= 1, got {steps}")
        self.spec = EnvSpec(
            task=NAME,
            actor_obs_dim=3,
            critic_obs_dim=3,
            action_dim=1,
            max_episode_steps=steps,
            control_dt=SUBSTEPS * PHYSICS_DT,
        )
        self._u: Optional[torch.Tensor] = None

    def mj_model(self) -> mujoco.MjModel:
        return mujoco.MjModel.from_xml_path(model_path())

    def bind(self, num_envs: int, device: torch.device) -> None:
        self._num_envs = num_envs
        self._device = torch.device(device)
        self._u = torch.zeros(num_envs, 1, device=self._device)  # last torque, for the control cost

    def reset(self, mask: torch.Tensor, rng: Uniforms) -> tuple[torch.Tensor, torch.Tensor]:
        noise = rng.rand(self._num_envs, 2) * 2.0 - 1.0
        qpos = math.pi + RESET_ANGLE_NOISE * noise[:, :1]
        qvel = RESET_VEL_NOISE * noise[:, 1:]
        return qpos, qvel

    def apply_action(self, actions: torch.Tensor, policy_actions: torch.Tensor | None = None) -> torch.Tensor:
        assert self._u is not None, "bind() first"
        self._u.copy_(actions.clamp(-1.0, 1.0) * MAX_TORQUE)
        return self._u

    def observe(self, sim: Backend) -> Obs:
        th = sim.qpos[:, 0]
        obs = torch.stack((torch.cos(th), torch.sin(th), sim.qvel[:, 0] * VEL_SCALE), dim=1).float()
        return {"actor": obs, "critic": obs}

    def reward(self, sim: Backend) -> torch.Tensor:
        assert self._u is not None, "bind() first"
        upright = (0.5 * (1.0 + torch.cos(sim.qpos[:, 0]))).float()
        return upright - CTRL_COST * self._u[:, 0].square()

    def terminated(self, sim: Backend) -> torch.Tensor:
        return torch.zeros(sim.qpos.shape[0], dtype=torch.bool, device=sim.qpos.device)
