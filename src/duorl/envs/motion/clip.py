"""The reference-clip format: an `.npz` with the arrays of the common retargeted-clip format.

    fps             scalar or [1]   frames per second
    joint_pos       [T, J]          hinge joint angles (rad), in the model's joint order
    joint_vel       [T, J]          their rates (rad/s)
    body_pos_w      [T, B, 3]       body frame origins in the world (m)
    body_quat_w     [T, B, 4]       body orientations (w, x, y, z)
    body_lin_vel_w  [T, B, 3]       body origin velocities in the world frame (m/s)
    body_ang_vel_w  [T, B, 3]       body angular velocities in the world frame (rad/s)
    body_names      [B] (optional)  names of the B bodies; without it, B is every body of the model
                                    except the world, in model order (the root body first)
    joint_names     [J] (optional)  names of the J joints; without it, the model's joint order

This module reads and writes that layout as it stands. Loading a clip for training goes through
motion/load.py instead, which reads every supported format (motion/formats.py), checks it and
recomputes everything but the root pose and the joint angles on duorl's G1 model.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from duorl.envs.motion.trajectory import Timed, frame_blend, nlerp

ARRAYS = ("joint_pos", "joint_vel", "body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w")


@dataclass(frozen=True)
class MotionClip(Timed):
    fps: float
    joint_pos: np.ndarray
    joint_vel: np.ndarray
    body_pos_w: np.ndarray
    body_quat_w: np.ndarray
    body_lin_vel_w: np.ndarray
    body_ang_vel_w: np.ndarray
    body_names: Optional[tuple[str, ...]] = None
    joint_names: Optional[tuple[str, ...]] = None

    def validate(self, source: str = "clip") -> "MotionClip":
        t, j = self.joint_pos.shape if self.joint_pos.ndim == 2 else (-1, -1)
        if t < 2 or self.fps <= 0:
            raise ValueError(f"{source}: needs fps > 0 and at least 2 frames of joint_pos [T, J]")
        b = self.body_pos_w.shape[1] if self.body_pos_w.ndim == 3 else -1
        want = {"joint_vel": (t, j), "body_pos_w": (t, b, 3), "body_quat_w": (t, b, 4),
                "body_lin_vel_w": (t, b, 3), "body_ang_vel_w": (t, b, 3)}
        for name, shape in want.items():
            got = getattr(self, name).shape
            if got != shape:
                raise ValueError(f"{source}: {name} has shape {got}, expected {shape}")
        for name in ARRAYS:
            if not np.isfinite(getattr(self, name)).all():
                raise ValueError(f"{source}: {name} has non-finite values")
        if self.body_names is not None and len(self.body_names) != b:
            raise ValueError(f"{source}: {len(self.body_names)} body_names for {b} bodies")
        if self.joint_names is not None and len(self.joint_names) != j:
            raise ValueError(f"{source}: {len(self.joint_names)} joint_names for {j} joints")
        return self

    def body_columns(self, model_body_names: Sequence[str], wanted: Sequence[str]) -> list[int]:
        """Columns of the B axis holding `wanted` bodies. model_body_names: the model's bodies
        without the world, in model order (used when the clip has no body_names)."""
        names = list(self.body_names) if self.body_names is not None else list(model_body_names)
        if self.body_names is None and self.body_pos_w.shape[1] != len(names):
            raise ValueError(f"the clip has {self.body_pos_w.shape[1]} bodies and no body_names; expected "
                             f"one per model body except the world ({len(names)})")
        missing = [w for w in wanted if w not in names]
        if missing:
            raise ValueError(f"the clip lacks bodies {missing}")
        return [names.index(w) for w in wanted]


def load_clip(path: str | Path) -> MotionClip:
    path = Path(path)
    with np.load(path, allow_pickle=False) as data:
        missing = [k for k in ("fps", *ARRAYS) if k not in data.files]
        if missing:
            raise ValueError(f"{path}: not a motion clip, missing {missing} (has {sorted(data.files)})")
        names = {k: tuple(str(n) for n in data[k]) if k in data.files else None for k in ("body_names", "joint_names")}
        clip = MotionClip(
            fps=float(np.asarray(data["fps"]).reshape(-1)[0]),
            **{k: np.asarray(data[k], dtype=np.float64) for k in ARRAYS},
            **names,
        )
    return clip.validate(str(path))


def save_clip(path: str | Path, clip: MotionClip) -> None:
    clip.validate()
    arrays = {k: getattr(clip, k).astype(np.float32) for k in ARRAYS}
    for k in ("body_names", "joint_names"):
        if getattr(clip, k) is not None:
            arrays[k] = np.array(getattr(clip, k))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:  # a file object: np.savez would otherwise append ".npz"
        np.savez(f, fps=np.array([clip.fps]), **arrays)


def resample(clip: MotionClip, fps: float) -> MotionClip:
    """The clip at another frame rate, every array interpolated (linear; nlerp for orientations).
    Loading a file resamples its trajectory and recomputes the rest instead (motion/load.py); this
    is for clips already consistent, where interpolation keeps them so to second order."""
    if abs(fps - clip.fps) < 1e-9:
        return clip
    i0, w = frame_blend(clip.num_frames, clip.fps, fps)

    def lerp(a: np.ndarray) -> np.ndarray:
        ww = w.reshape(-1, *([1] * (a.ndim - 1)))
        return (1.0 - ww) * a[i0] + ww * a[i0 + 1]

    return replace(
        clip,
        fps=float(fps),
        **{k: lerp(getattr(clip, k)) for k in ARRAYS if k != "body_quat_w"},
        body_quat_w=nlerp(clip.body_quat_w[i0], clip.body_quat_w[i0 + 1], w.reshape(-1, 1, 1)),
    )
