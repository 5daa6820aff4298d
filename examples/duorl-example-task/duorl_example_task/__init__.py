"""`example_reach`: push a point mass on a plane to a target drawn anew each episode.

A duorl task in its own package (docs/tasks.md). duorl finds it by the entry point this package's
pyproject.toml registers (`duorl train --task example_reach`) or by import path
(`duorl train --task duorl_example_task:make_task`). The task reads and resets the simulation only
through the backend's torch views, so it runs on MuJoCo C (`--sim mujoco`) and MuJoCo Warp alike.

Observations (actor and critic alike): the target's offset from the mass (x, y, scaled by 1/TARGET_RANGE)
and the mass's velocity (x, y), float32. Actions: the two motor forces in [-1, 1] N. Reward per step: minus
the distance to the target in metres, so a 50-step episode that idles near the origin scores about
-10 and one that reaches the target in a few steps about -2.
Mirror: the task is symmetric about the x axis (y -> -y).
Its own key: `task.target_range` (ReachConfig below; `make_task.config_class` declares it), the half-width
of the square the targets are drawn from; `duorl config --keys` lists it under example_reach.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from typing import Optional

import mujoco
import torch

from duorl.config.schema import TaskConfig, setting
from duorl.envs.base import EnvSpec, Mirror, Obs, Uniforms

NAME = "example_reach"
PHYSICS_DT = 0.02  # the MJCF's timestep
SUBSTEPS = 2  # control at 25 Hz
EPISODE_STEPS = 50  # 2 s
TARGET_RANGE = 0.3  # m: targets uniform in [-0.3, 0.3]^2 (task.target_range's default)
START_RANGE = 0.05  # m: the mass starts uniform in [-0.05, 0.05]^2, at rest
# y -> -y: the y offset, the y velocity and the y force change sign
MIRROR = Mirror(actor_obs=((0, 1, 2, 3), (1.0, -1.0, 1.0, -1.0)),
                critic_obs=((0, 1, 2, 3), (1.0, -1.0, 1.0, -1.0)),
                action=((0, 1), (1.0, -1.0)))


@dataclass
class ReachConfig(TaskConfig):
    """example_reach's keys: the ones every task reads (task.name, task.max_episode_steps) and its own."""

    target_range: float = setting(TARGET_RANGE, "example_reach: targets are drawn uniformly from a square of this "
                                                "half-width around the origin (m)", above=0)


class PointReach:
    """The task (see the module docstring); implements duorl.envs.tasks.base.Task."""

    substeps = SUBSTEPS
    uniforms_per_step = 4  # reset(): the target (2) and the start position (2)

    def __init__(self, max_episode_steps: Optional[int] = None, target_range: float = TARGET_RANGE) -> None:
        self.target_range = float(target_range)
        self.spec = EnvSpec(task=NAME, actor_obs_dim=4, critic_obs_dim=4, action_dim=2,
                            max_episode_steps=EPISODE_STEPS if max_episode_steps is None else int(max_episode_steps),
                            control_dt=SUBSTEPS * PHYSICS_DT, metric_names=("distance",), mirror=MIRROR)
        self._target: Optional[torch.Tensor] = None

    def mj_model(self) -> mujoco.MjModel:
        return mujoco.MjModel.from_xml_path(str(resources.files(__package__) / "point_reach.xml"))

    def bind(self, num_envs: int, device: torch.device) -> None:
        self._n = num_envs
        self._target = torch.zeros(num_envs, 2, device=device)

    def reset(self, mask: torch.Tensor, rng: Uniforms) -> tuple[torch.Tensor, torch.Tensor]:
        assert self._target is not None, "bind() first"
        u = rng.rand(self._n, 4) * 2.0 - 1.0  # drawn whatever the mask: rollouts depend only on the seed
        self._target.copy_(torch.where(mask.unsqueeze(1), self.target_range * u[:, :2], self._target))
        return START_RANGE * u[:, 2:], torch.zeros_like(u[:, 2:])

    def apply_action(self, actions: torch.Tensor, policy_actions: torch.Tensor | None = None) -> torch.Tensor:
        return actions.clamp(-1.0, 1.0)  # the motors' gear is 1: ctrl in N

    def _offset(self, sim) -> torch.Tensor:
        assert self._target is not None, "bind() first"
        return self._target - sim.qpos[:, :2].float()

    def observe(self, sim) -> Obs:
        obs = torch.cat((self._offset(sim) / self.target_range, sim.qvel[:, :2].float()), dim=1)
        return {"actor": obs, "critic": obs}

    def reward(self, sim) -> torch.Tensor:
        return -self._offset(sim).norm(dim=1)

    def terminated(self, sim) -> torch.Tensor:
        return torch.zeros(self._n, dtype=torch.bool, device=sim.qpos.device)

    def metrics(self, sim) -> torch.Tensor:
        """[N, 1]: the distance to the target (logged as Task/distance)."""
        return self._offset(sim).norm(dim=1, keepdim=True)

    # the targets are task state: a resumed run continues the same episodes
    def state_keys(self) -> tuple[str, ...]:
        return ("target",)

    def state_dict(self) -> dict[str, torch.Tensor]:
        assert self._target is not None, "bind() first"
        return {"target": self._target.clone()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        assert self._target is not None, "bind() first"
        self._target.copy_(state["target"])


def make_task(cfg: ReachConfig) -> PointReach:
    """The factory duorl calls with the run's task keys (task.max_episode_steps and task.target_range)."""
    return PointReach(max_episode_steps=cfg.max_episode_steps, target_range=cfg.target_range)


make_task.config_class = ReachConfig  # the task's own keys: duorl reads them before the run's configuration
