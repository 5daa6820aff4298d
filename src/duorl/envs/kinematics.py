"""Forward kinematics of a MuJoCo body tree in torch: body poses and velocities from qpos/qvel.

Why not read MuJoCo's own xpos/xquat/cvel: after mj_step (C or Warp) those derived quantities
describe the state *before* the last integration, one physics substep behind qpos/qvel, and after
a masked reset they describe the pre-reset state until another forward pass. The mujoco backend's
rollout returns state only, so reading them there would cost an extra batched forward per step.
Computing the few bodies a task needs from qpos/qvel is exact, identical on both backends,
whole-batch tensor work (one small op group per tree depth, no Python loop over envs) and so
capturable in a CUDA graph.

Supported trees: a root body with a free joint (its parent is the world), every other body with
zero or one hinge joint (the Unitree G1, most humanoids). Velocities are those of each body's frame
origin in the world frame (MuJoCo's mj_objectVelocity for mjOBJ_XBODY with flg_local=0).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import mujoco
import numpy as np
import torch

from duorl.envs import quat as Q


@dataclass
class Frames:
    """Per requested body, in the order asked: pos [N, B, 3], quat [N, B, 4] (w, x, y, z) and,
    when qvel was given, lin_vel / ang_vel [N, B, 3], all in the world frame."""

    pos: torch.Tensor
    quat: torch.Tensor
    lin_vel: Optional[torch.Tensor] = None
    ang_vel: Optional[torch.Tensor] = None


class BodyKinematics:
    """Forward kinematics for `bodies` (MuJoCo body ids) of `model`; see the module docstring."""

    def __init__(self, model: mujoco.MjModel, bodies: Sequence[int], device: torch.device | str,
                 dtype: torch.dtype = torch.float32) -> None:
        if not bodies or min(bodies) < 1:
            raise ValueError(f"bodies must be non-world body ids, got {list(bodies)}")
        # the closure: requested bodies and their ancestors, in MuJoCo's (topological) id order
        closure: set[int] = set()
        for b in bodies:
            while b > 0:
                closure.add(int(b))
                b = int(model.body_parentid[b])
        order = sorted(closure)
        self.device, self.dtype = torch.device(device), dtype

        depth = {}
        roots = []
        joint_of: dict[int, int] = {}
        for b in order:
            parent = int(model.body_parentid[b])
            nj, j0 = int(model.body_jntnum[b]), int(model.body_jntadr[b])
            if parent == 0:
                if nj != 1 or model.jnt_type[j0] != mujoco.mjtJoint.mjJNT_FREE:
                    raise ValueError(f"body {b}: a root body needs exactly one free joint")
                roots.append(b)
                depth[b] = 0
                continue
            if nj > 1 or (nj == 1 and model.jnt_type[j0] != mujoco.mjtJoint.mjJNT_HINGE):
                raise ValueError(f"body {b}: only zero or one hinge joint per non-root body is supported")
            if nj == 1:
                joint_of[b] = j0
            depth[b] = depth[parent] + 1
        if len(roots) != 1:
            raise ValueError(f"expected one free-floating root among the bodies, found {len(roots)}")
        root = roots[0]
        jr = int(model.body_jntadr[root])
        self._root_qpos = int(model.jnt_qposadr[jr])
        self._root_dof = int(model.jnt_dofadr[jr])

        def t(x: np.ndarray, dt: torch.dtype = dtype) -> torch.Tensor:
            return torch.as_tensor(np.asarray(x), dtype=dt, device=device)

        # Per tree depth: the constant parts of each body's transform, for rotation-matrix FK.
        # A hinge's local rotation is Rodrigues' R_off (I + sin q K + (1 - cos q) K^2) with K the
        # axis' cross-product matrix: with A = R_off, B = R_off K, C = R_off K^2 precomputed it is
        # A + sin q B + (1 - cos q) C, three fused tensor ops and no quaternion algebra.
        self._levels = []
        prev_slots: list[int] = [root]
        for d in range(1, max(depth.values()) + 1):
            bs = [b for b in order if depth[b] == d]
            js = [joint_of.get(b, -1) for b in bs]
            R_off = np.stack([_quat_to_mat(model.body_quat[b]) for b in bs])
            axis = np.stack([model.jnt_axis[j] if j >= 0 else np.zeros(3) for j in js])
            anchor = np.stack([model.jnt_pos[j] if j >= 0 else np.zeros(3) for j in js])
            if np.abs(anchor).max() > 0:
                raise ValueError("hinge joints away from their body origin (jnt_pos != 0) are not supported")
            K = np.stack([_skew(a) for a in axis])
            self._levels.append(dict(
                parents=_maybe_index([prev_slots.index(int(model.body_parentid[b])) for b in bs], len(prev_slots), device),
                A=t(R_off), B=t(R_off @ K), C=t(R_off @ K @ K),
                off=t(model.body_pos[bs])[..., None],  # [L, 3, 1]
                w=t(np.einsum("lij,lj->li", R_off, axis))[..., None],  # joint axis in the parent frame
                qadr=t([model.jnt_qposadr[j] if j >= 0 else 0 for j in js], torch.long),
                dadr=t([model.jnt_dofadr[j] if j >= 0 else 0 for j in js], torch.long),
                # None: every body of the level has a joint (no masking needed)
                moving=None if min(js) >= 0 else t([1.0 if j >= 0 else 0.0 for j in js]),
            ))
            prev_slots = bs
        level_of = {root: (0, 0)}
        for d, lv_bodies in enumerate([[b for b in order if depth[b] == d] for d in range(1, max(depth.values()) + 1)], 1):
            for i, b in enumerate(lv_bodies):
                level_of[b] = (d, i)
        # where each requested body lands in the concatenation of all levels
        sizes = [1] + [sum(depth[b] == d for b in order) for d in range(1, max(depth.values()) + 1)]
        starts = np.cumsum([0] + sizes[:-1])
        self._out = torch.tensor([int(starts[level_of[int(b)][0]]) + level_of[int(b)][1] for b in bodies],
                                 dtype=torch.long, device=device)

    def __call__(self, qpos: torch.Tensor, qvel: Optional[torch.Tensor] = None) -> Frames:
        qpos = qpos.to(self.dtype)
        a = self._root_qpos
        quat = Q.normalize(qpos[:, a + 3 : a + 7])
        R = [Q.to_matrix(quat).unsqueeze(1)]  # per level [N, L, 3, 3]
        P = [qpos[:, a : a + 3].unsqueeze(1)]  # [N, L, 3]
        vel = qvel is not None
        if vel:
            assert qvel is not None
            qvel = qvel.to(self.dtype)
            v0 = self._root_dof
            V = [qvel[:, v0 : v0 + 3].unsqueeze(1)]
            # free joint: angular velocity in the body frame -> world
            W = [(R[0] @ qvel[:, v0 + 3 : v0 + 6, None].unsqueeze(1)).squeeze(-1)]
        for lv in self._levels:
            par = lv["parents"]
            Rp, pp = _take(R[-1], par), _take(P[-1], par)
            q = qpos.index_select(1, lv["qadr"])[..., None, None]
            Rl = lv["A"] + torch.sin(q) * lv["B"] + (1.0 - torch.cos(q)) * lv["C"]
            offset = (Rp @ lv["off"]).squeeze(-1)  # parent origin -> this origin, world frame
            R.append(Rp @ Rl)
            P.append(pp + offset)
            if vel:
                wp_, vp_ = _take(W[-1], par), _take(V[-1], par)
                qd = qvel.index_select(1, lv["dadr"])
                if lv["moving"] is not None:
                    qd = qd * lv["moving"]
                qd = qd.unsqueeze(-1)
                W.append(wp_ + (Rp @ lv["w"]).squeeze(-1) * qd)
                V.append(vp_ + torch.cross(wp_, offset, dim=-1))
        o = self._out
        rot = _mat_to_quat(torch.cat(R, dim=1).index_select(1, o))
        pos = torch.cat(P, dim=1).index_select(1, o)
        if vel:
            return Frames(pos, rot, torch.cat(V, dim=1).index_select(1, o), torch.cat(W, dim=1).index_select(1, o))
        return Frames(pos, rot)


def _maybe_index(idx: list[int], n_prev: int, device: torch.device | str) -> Optional[torch.Tensor]:
    """The parent gather of a level, or None where it is the identity (a chain continues)."""
    if idx == list(range(n_prev)):
        return None
    return torch.tensor(idx, dtype=torch.long, device=device)


def _take(x: torch.Tensor, idx: Optional[torch.Tensor]) -> torch.Tensor:
    return x if idx is None else x.index_select(1, idx)


def _skew(v: np.ndarray) -> np.ndarray:
    return np.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])


def _quat_to_mat(q: np.ndarray) -> np.ndarray:
    m = np.empty(9)
    mujoco.mju_quat2Mat(m, np.asarray(q, dtype=np.float64))
    return m.reshape(3, 3)


def _mat_to_quat(R: torch.Tensor) -> torch.Tensor:
    """Rotation matrices [..., 3, 3] -> unit quaternions, branch-free and robust near pi.

    The four textbook formulas each divide by one component; the one whose component is largest is
    well conditioned, so all four are formed and that one is picked per matrix.
    """
    m00, m01, m02 = R[..., 0, 0], R[..., 0, 1], R[..., 0, 2]
    m10, m11, m12 = R[..., 1, 0], R[..., 1, 1], R[..., 1, 2]
    m20, m21, m22 = R[..., 2, 0], R[..., 2, 1], R[..., 2, 2]
    tw = 1.0 + m00 + m11 + m22
    tx = 1.0 + m00 - m11 - m22
    ty = 1.0 - m00 + m11 - m22
    tz = 1.0 - m00 - m11 + m22
    cands = torch.stack(
        (
            torch.stack((tw, m21 - m12, m02 - m20, m10 - m01), dim=-1),
            torch.stack((m21 - m12, tx, m01 + m10, m02 + m20), dim=-1),
            torch.stack((m02 - m20, m01 + m10, ty, m12 + m21), dim=-1),
            torch.stack((m10 - m01, m02 + m20, m12 + m21, tz), dim=-1),
        ),
        dim=-2,
    )  # [..., 4 candidates, 4]
    t = torch.stack((tw, tx, ty, tz), dim=-1)
    best = t.argmax(dim=-1, keepdim=True)
    q = torch.gather(cands, -2, best.unsqueeze(-1).expand(*best.shape, 4)).squeeze(-2)
    q = q * (0.5 / torch.sqrt(torch.gather(t, -1, best).clamp_min(1e-12)))
    return q * torch.where(q[..., :1] < 0, -1.0, 1.0)  # w >= 0, as MuJoCo's mju_mat2Quat
