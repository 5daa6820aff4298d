"""The `mujoco` backend: MuJoCo's C library, batched over CPU threads by `mujoco.rollout`.

One `Rollout.rollout` call advances all worlds by `substeps` physics steps on a thread pool, so
stepping has no Python loop over environments. The state lives in one float64 numpy array of
MuJoCo "full physics" state rows; the torch tensors exposed here are zero-copy views of it.
"""

from __future__ import annotations

import copy
import os

import mujoco
import numpy as np
import torch
from mujoco import rollout

_FULLPHYSICS = int(mujoco.mjtState.mjSTATE_FULLPHYSICS)
_CTRL = int(mujoco.mjtState.mjSTATE_CTRL)


def _component_offset(model: mujoco.MjModel, component: int) -> int:
    """Offset of `component` inside a full-physics state row.

    mj_getState lays components out in increasing bit order, so the offset is the size of the
    lower bits that full-physics contains.
    """
    offset, bit = 0, 1
    while bit < component:
        if _FULLPHYSICS & bit:
            offset += mujoco.mj_stateSize(model, bit)
        bit <<= 1
    return offset


class MujocoBackend:
    """`num_envs` MuJoCo worlds stepped by a rollout thread pool; device is always the CPU."""

    def __init__(self, model: mujoco.MjModel, num_envs: int, substeps: int, nthread: int = 0) -> None:
        if num_envs < 1 or substeps < 1:
            raise ValueError(f"num_envs and substeps must be >= 1, got {num_envs} and {substeps}")
        self.num_envs = num_envs
        self.substeps = substeps
        self.device = torch.device("cpu")
        self._model = model
        self._dt = float(model.opt.timestep)

        nthread = nthread if nthread > 0 else (os.cpu_count() or 1)
        nthread = min(nthread, num_envs)
        # nthread=0 makes Rollout run on the calling thread: no pool hand-off for a single thread.
        self._pool_threads = nthread if nthread > 1 else 0
        self._rollout = rollout.Rollout(nthread=self._pool_threads)
        self._datas = [mujoco.MjData(model) for _ in range(max(nthread, 1))]
        # skip_checks=True skips rollout's per-call tiling, so it wants one model per world.
        self._models = [model] * num_envs
        self._chunk = max(1, num_envs // (max(nthread, 1) * 10))

        nstate = mujoco.mj_stateSize(model, _FULLPHYSICS)
        nu, nsens = model.nu, model.nsensordata
        # The reset row: MuJoCo's own initial state (time 0, qpos0, zero act, default history).
        d0 = mujoco.MjData(model)
        mujoco.mj_resetData(model, d0)
        init = np.empty(nstate, dtype=np.float64)
        mujoco.mj_getState(model, d0, init, _FULLPHYSICS)

        self._state = np.tile(init, (num_envs, 1))  # rollout input: the current state
        self._ctrl = np.zeros((num_envs, substeps, nu), dtype=np.float64)
        self._out = np.empty((num_envs, substeps, nstate), dtype=np.float64)
        self._sens = np.zeros((num_envs, substeps, nsens), dtype=np.float64)

        self._init_row = torch.from_numpy(init)
        self.state = torch.from_numpy(self._state)
        self._ctrl_t = torch.from_numpy(self._ctrl)
        self._out_t = torch.from_numpy(self._out)
        t0 = _component_offset(model, int(mujoco.mjtState.mjSTATE_TIME))
        q0 = _component_offset(model, int(mujoco.mjtState.mjSTATE_QPOS))
        v0 = _component_offset(model, int(mujoco.mjtState.mjSTATE_QVEL))
        self.time = self.state[:, t0]
        self.qpos = self.state[:, q0 : q0 + model.nq]
        self.qvel = self.state[:, v0 : v0 + model.nv]
        self.sensordata = torch.from_numpy(self._sens)[:, -1]
        self._t0 = t0
        self.diverged = torch.zeros(num_envs, dtype=torch.bool)

    def step(self, ctrl: torch.Tensor) -> None:
        # Zero-order hold: the same ctrl for every substep (broadcast copy, float32 -> float64).
        self._ctrl_t.copy_(ctrl.unsqueeze(1))
        self._rollout.rollout(
            self._models,
            self._datas,
            self._state,
            self._ctrl,
            control_spec=_CTRL,
            skip_checks=True,
            nstep=self.substeps,
            state=self._out,
            sensordata=self._sens,
            chunk_size=self._chunk,
        )
        # A world that raised a MuJoCo warning (NaN/Inf/huge qpos, qvel or qacc) was reset to qpos0
        # by mj_step and its rollout stopped early, so its clock did not advance by `substeps` steps.
        # Its state is finite but bogus; report it so the NaN guard can reset the env.
        elapsed = self._out_t[:, -1, self._t0] - self.time
        torch.lt(elapsed, (self.substeps - 0.5) * self._dt, out=self.diverged)
        self.state.copy_(self._out_t[:, -1])

    @property
    def models(self) -> tuple[mujoco.MjModel, ...]:
        """The model each world steps with (one shared model until set_model_fields gives each its own)."""
        return tuple(self._models)

    def set_model_fields(self, fields: dict[str, torch.Tensor]) -> None:
        """Give each world its own values of MjModel fields: {name: [N, *field.shape]}. The rollout
        takes one model per world, so each world gets its own copy of the model (small for the
        env counts this CPU backend runs)."""
        if self._models and self._models[0] is self._models[-1]:
            self._models = [copy.copy(self._model) for _ in range(self.num_envs)]
        for name, values in fields.items():
            vals = values.detach().cpu().numpy()
            ref = getattr(self._model, name)
            if vals.shape != (self.num_envs, *ref.shape):
                raise ValueError(f"{name}: expected shape {(self.num_envs, *ref.shape)}, got {vals.shape}")
            for m, v in zip(self._models, vals):
                getattr(m, name)[...] = v

    def prepare_kernels(self) -> None:
        """MuJoCo's C library compiles nothing."""

    def reset_envs(self, mask: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        m = mask.unsqueeze(1)
        self.state.copy_(torch.where(m, self._init_row, self.state))
        self.qpos.copy_(torch.where(m, qpos.to(self.qpos.dtype), self.qpos))
        self.qvel.copy_(torch.where(m, qvel.to(self.qvel.dtype), self.qvel))

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {"state": self.state.clone(), "sensordata": torch.from_numpy(self._sens.copy())}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        self.state.copy_(state["state"])
        self._sens[...] = state["sensordata"].numpy()

    def close(self) -> None:
        if self._rollout is not None and self._rollout.rollout_ is not None:
            self._rollout.close()
