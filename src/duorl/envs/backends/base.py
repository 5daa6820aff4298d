"""The Backend protocol: a batch of MuJoCo worlds seen as torch tensors.

A backend owns the physics state of `num_envs` copies of one MjModel. It exposes the state as
batched torch *views* (writes through them change the simulation) so tasks can read and reset it
with tensor ops, on either backend, without a Python loop over environments.
"""

from __future__ import annotations

from typing import Protocol

import torch


class Backend(Protocol):
    num_envs: int
    device: torch.device
    substeps: int
    # Views of the physics state. dtype is the backend's (float64 for mujoco, float32 for mjwarp):
    # tasks cast what they return, never assume one.
    qpos: torch.Tensor  # [N, nq]
    qvel: torch.Tensor  # [N, nv]
    # Sensor values computed during the last physics substep (as mj_step leaves them).
    sensordata: torch.Tensor  # [N, nsensordata]
    # True where the last step() hit a simulator instability that the simulator itself papered over
    # (MuJoCo C resets such a world to qpos0 and stops its rollout; MuJoCo Warp drops the constraint
    # rows or contacts beyond its capacities); the NaN guard resets these envs.
    diverged: torch.Tensor  # [N] bool

    def step(self, ctrl: torch.Tensor) -> None:
        """Hold ctrl [N, nu] and advance every world by `substeps` physics steps. No host sync."""
        ...

    def reset_envs(self, mask: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        """Where mask [N] is True, clear the world to its initial physics state with this qpos [N, nq]
        and qvel [N, nv] (rows where mask is False are ignored). Masked tensor writes: no host sync."""
        ...

    def set_model_fields(self, fields: dict[str, torch.Tensor]) -> None:
        """Give each world its own values of MjModel fields ({name: [N, *field.shape]}, e.g.
        geom_friction, body_mass) for domain randomisation; called once, before the first step."""
        ...

    def prepare_kernels(self) -> None:
        """Start compiling what the first step will need (it may go on in the background; the first step
        waits for it); called once, after set_model_fields. A no-op where nothing is compiled."""
        ...

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Copies of every array the next step reads (exact resume)."""
        ...

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None: ...

    def close(self) -> None: ...
