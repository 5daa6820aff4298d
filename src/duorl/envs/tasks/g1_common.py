"""What the two G1 tasks share: the model, joint-position actions, reset helpers, randomisation.

Actions are joint-position targets around the standing pose: ctrl = q_default + scale * a with a
clipped to [-1, 1] and scale = 0.25 * effort / kp per joint (the published G1 choice, docs/design.md §7).
"""

from __future__ import annotations

import math
from typing import Any, Optional

import mujoco
import torch

from duorl.envs.tasks.keys import ACTION_RANGES
from duorl.envs.base import Uniforms
from duorl.envs.g1 import model as g1
from duorl.envs.g1.assets import resolve_g1_xml

# MuJoCo Warp contact/constraint capacities per world. The robot touches only the floor (no self
# collisions): 14 foot capsules make at most 28 contacts (4 pyramidal rows each, 112 rows: a robot
# standing on both feet); a robot lying on the floor adds about 20 one-row contacts; 29 joint limits
# may be active. Measured on an H200 (benchmarks/2026-11-30_collector_capacity_h200/): 4096 worlds
# under the untrained actor for 1500 ticks peaked at 115 rows in any world and 19 contacts per world
# in the shared pool. Every kernel of the solver's row loops is launched over njmax rows per world:
# 160 instead of 300 makes a g1_walk_flat tick 3.0% faster there. A world that overflows anyway
# drops rows, so the backend flags it and the NaN guard resets it (MjWarpBackend.diverged).
MJWARP_CAPACITY = {"nconmax": 64, "njmax": 160}


class G1TaskBase:
    """Model, action and randomisation plumbing of the G1 tasks (no reward or observation)."""

    substeps = g1.SUBSTEPS
    control_dt = g1.SUBSTEPS * g1.PHYSICS_DT
    # passed to MjWarpBackend (put_data_kwargs)
    mjwarp_put_data_kwargs = MJWARP_CAPACITY

    def __init__(self, robot_xml: Optional[str] = None, randomize: bool = True, action_range: str = "pd") -> None:
        # resolved now, so a missing model fails when the task is made (env_spec, before any process
        # is spawned), with the error that names every way to provide it
        self.xml_path = resolve_g1_xml(robot_xml)
        self.randomize = randomize
        if action_range not in ACTION_RANGES:
            raise ValueError(f"task.action_range={action_range!r}: allowed {', '.join(ACTION_RANGES)}")
        self.action_range = action_range
        self._model: Optional[mujoco.MjModel] = None

    # -- model ---------------------------------------------------------------------------------
    def mj_model(self) -> mujoco.MjModel:
        return g1.build_model(self.xml_path)

    def check(self) -> list[str]:
        """Before anything is spawned (duorl/cli/preflight.py): the model file builds into a G1 (what every
        collector builds first). Raises ConfigError naming the file; returns warnings (none)."""
        from duorl.config.errors import ConfigError

        try:
            g1.G1Layout.of(self.host_model())
        except Exception as e:  # noqa: BLE001 - any failure to build a user's file means: not usable
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise ConfigError(
                "task.robot_xml", str(self.xml_path), f"not a usable G1 model ({type(e).__name__}: {first})",
                "the G1 MJCF of mjlab's unitree_g1 asset (29 hinge joints under a free root)",
                "point task.robot_xml (or DUORL_G1_XML) at that g1.xml, or run `duorl assets g1 --force` to "
                "refill the cache",
            ) from None
        return []

    def host_model(self) -> mujoco.MjModel:
        """One built model kept for constants (layout, masses); backends build their own."""
        if self._model is None:
            self._model = self.mj_model()
        return self._model

    def bind(self, num_envs: int, device: torch.device) -> None:
        m = self.host_model()
        self.layout = g1.G1Layout.of(m)
        self._num_envs = num_envs
        self._device = dev = torch.device(device)
        f32 = dict(dtype=torch.float32, device=dev)
        self.q_default = torch.as_tensor(g1.default_joint_pos(), **f32)
        self.joint_range = torch.as_tensor(self.layout.joint_range, **f32)
        if self.action_range == "joint_limits":  # +-1 reaches the joint limit farther from the pose
            self.action_scale = torch.maximum((self.joint_range[:, 0] - self.q_default).abs(),
                                              (self.joint_range[:, 1] - self.q_default).abs())
        else:
            self.action_scale = torch.as_tensor(g1.action_scale(), **f32)
        self.qpos_default = torch.as_tensor(g1.default_qpos(), **f32)
        self.nq, self.nv = m.nq, m.nv
        self.last_action = torch.zeros(num_envs, g1.NUM_JOINTS, **f32)
        self.prev_action = torch.zeros(num_envs, g1.NUM_JOINTS, **f32)
        # the policy's deterministic outputs behind the last two actions: the action-rate penalty
        # reads these (as published for FastSAC), so exploration noise is not penalised
        self.last_policy_action = torch.zeros(num_envs, g1.NUM_JOINTS, **f32)
        self.prev_policy_action = torch.zeros(num_envs, g1.NUM_JOINTS, **f32)
        self._ctrl = torch.zeros(num_envs, g1.NUM_JOINTS, **f32)

    def body_id(self, name: str) -> int:
        return self.layout.body_ids[name]

    # -- actions -------------------------------------------------------------------------------
    def apply_action(self, actions: torch.Tensor, policy_actions: torch.Tensor | None = None) -> torch.Tensor:
        a = actions.to(torch.float32).clamp(-1.0, 1.0)
        p = a if policy_actions is None else policy_actions.to(torch.float32).clamp(-1.0, 1.0)
        self.prev_action.copy_(self.last_action)
        self.last_action.copy_(a)
        self.prev_policy_action.copy_(self.last_policy_action)
        self.last_policy_action.copy_(p)
        torch.addcmul(self.q_default, self.action_scale, a, out=self._ctrl)
        return self._ctrl

    # -- helpers for subclasses ----------------------------------------------------------------
    @staticmethod
    def _uniform(rng: Uniforms, *shape: int, lo: float | torch.Tensor = 0.0,
                 hi: float | torch.Tensor = 1.0) -> torch.Tensor:
        return lo + (hi - lo) * rng.rand(*shape)

    def _state(self, sim: Any) -> tuple[torch.Tensor, torch.Tensor]:
        return sim.qpos.to(torch.float32), sim.qvel.to(torch.float32)

    @staticmethod
    def _masked(mask: torch.Tensor, new: torch.Tensor, old: torch.Tensor) -> torch.Tensor:
        m = mask.view(-1, *([1] * (new.dim() - 1)))
        return torch.where(m, new, old)

    def reset_actions(self, mask: torch.Tensor) -> None:
        m = mask.unsqueeze(1)
        for t in (self.last_action, self.prev_action, self.last_policy_action, self.prev_policy_action):
            t.masked_fill_(m, 0.0)

    def action_rate(self) -> torch.Tensor:
        """|p_t - p_{t-1}|^2 of the policy's deterministic outputs (apply_action's policy_actions)."""
        return (self.last_policy_action - self.prev_policy_action).square().sum(dim=1)

    def joint_limit_violation(self, qj: torch.Tensor, soft: float = 0.9) -> torch.Tensor:
        """Sum over joints of how far each is outside its soft range (soft * the hard range, about
        its middle): the published joint-limit penalty."""
        lo, hi = self.joint_range[:, 0], self.joint_range[:, 1]
        mid, half = 0.5 * (lo + hi), 0.5 * (hi - lo) * soft
        return ((mid - half) - qj).clamp_min(0.0).sum(dim=1) + (qj - (mid + half)).clamp_min(0.0).sum(dim=1)

    # -- domain randomisation (drawn once, at build) ------------------------------------------
    def model_randomization(self, num_envs: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
        """Per-env model fields: foot friction U(0.5, 1.25) (the feet have priority, so theirs is the
        contact's), torso mass + U(-1, 3) kg (ancestors' subtree masses follow). Small on purpose."""
        if not self.randomize:
            return {}
        m = self.host_model()
        lay = g1.G1Layout.of(m)
        dev = generator.device
        friction = torch.as_tensor(m.geom_friction, dtype=torch.float32, device=dev).repeat(num_envs, 1, 1)
        mu = 0.5 + 0.75 * torch.rand(num_envs, 1, generator=generator, device=dev)
        feet = torch.as_tensor(lay.foot_geoms, device=dev)
        friction[:, feet, 0] = mu
        mass = torch.as_tensor(m.body_mass, dtype=torch.float32, device=dev).repeat(num_envs, 1)
        sub = torch.as_tensor(m.body_subtreemass, dtype=torch.float32, device=dev).repeat(num_envs, 1)
        torso = lay.body_ids[g1.ANCHOR_BODY]
        delta = -1.0 + 4.0 * torch.rand(num_envs, generator=generator, device=dev)
        mass[:, torso] += delta
        b = torso
        while b >= 0:  # the torso and every ancestor (world included) carry the added mass
            sub[:, b] += delta
            b = int(m.body_parentid[b]) if b > 0 else -1
        return {"geom_friction": friction, "body_mass": mass, "body_subtreemass": sub}

    # -- exact resume --------------------------------------------------------------------------
    _STATE: tuple[str, ...] = ("last_action", "prev_action", "last_policy_action", "prev_policy_action")

    def state_keys(self) -> tuple[str, ...]:
        return self._STATE

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {k: getattr(self, k).clone() for k in self._STATE}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        for k in self._STATE:
            getattr(self, k).copy_(state[k])


def root_yaw_quat(yaw: torch.Tensor) -> torch.Tensor:
    zero = torch.zeros_like(yaw)
    return torch.stack((torch.cos(0.5 * yaw), zero, zero, torch.sin(0.5 * yaw)), dim=-1)


def wrap_angle(x: torch.Tensor) -> torch.Tensor:
    return torch.remainder(x + math.pi, 2.0 * math.pi) - math.pi
