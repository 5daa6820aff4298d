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
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

ARRAYS = ("joint_pos", "joint_vel", "body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w")


@dataclass(frozen=True)
class MotionClip:
    fps: float
    joint_pos: np.ndarray
    joint_vel: np.ndarray
    body_pos_w: np.ndarray
    body_quat_w: np.ndarray
    body_lin_vel_w: np.ndarray
    body_ang_vel_w: np.ndarray
    body_names: Optional[tuple[str, ...]] = None

    @property
    def num_frames(self) -> int:
        return int(self.joint_pos.shape[0])

    @property
    def duration(self) -> float:
        return (self.num_frames - 1) / self.fps

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
        names = tuple(str(n) for n in data["body_names"]) if "body_names" in data.files else None
        clip = MotionClip(
            fps=float(np.asarray(data["fps"]).reshape(-1)[0]),
            **{k: np.asarray(data[k], dtype=np.float64) for k in ARRAYS},
            body_names=names,
        )
    return clip.validate(str(path))


def save_clip(path: str | Path, clip: MotionClip) -> None:
    clip.validate()
    arrays = {k: getattr(clip, k).astype(np.float32) for k in ARRAYS}
    if clip.body_names is not None:
        arrays["body_names"] = np.array(clip.body_names)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:  # a file object: np.savez would otherwise append ".npz"
        np.savez(f, fps=np.array([clip.fps]), **arrays)


def _nlerp(q0: np.ndarray, q1: np.ndarray, w: np.ndarray) -> np.ndarray:
    q1 = np.where((q0 * q1).sum(-1, keepdims=True) < 0, -q1, q1)  # the short way round
    q = (1.0 - w) * q0 + w * q1
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def resample(clip: MotionClip, fps: float) -> MotionClip:
    """The clip at another frame rate: linear interpolation, normalised lerp for orientations
    (frames are close, so nlerp and slerp agree to well below a milliradian)."""
    if abs(fps - clip.fps) < 1e-9:
        return clip
    n = int(np.floor(clip.duration * fps + 1e-9)) + 1
    s = np.arange(n) / fps * clip.fps  # source frame coordinate
    i0 = np.clip(np.floor(s).astype(int), 0, clip.num_frames - 2)
    w = (s - i0)

    def lerp(a: np.ndarray) -> np.ndarray:
        ww = w.reshape(-1, *([1] * (a.ndim - 1)))
        return (1.0 - ww) * a[i0] + ww * a[i0 + 1]

    return replace(
        clip,
        fps=float(fps),
        **{k: lerp(getattr(clip, k)) for k in ARRAYS if k != "body_quat_w"},
        body_quat_w=_nlerp(clip.body_quat_w[i0], clip.body_quat_w[i0 + 1], w.reshape(-1, 1, 1)),
    )
