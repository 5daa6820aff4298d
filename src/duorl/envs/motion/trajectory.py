"""A clip as the robot's state trajectory: root pose and joint angles per frame, nothing derived.

Every clip format reduces to this (the free joint's qpos, frame by frame); body poses come from
forward kinematics of it and velocities from finite differences of it (motion/fk.py), so whatever
a file stored beside the poses can only be checked against them, never trusted over them.
Quaternions are (w, x, y, z), MuJoCo's order, throughout.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


class Timed:
    """Frame count and duration of anything with fps and a [T, ...] joint_pos."""

    fps: float
    joint_pos: np.ndarray

    @property
    def num_frames(self) -> int:
        return int(self.joint_pos.shape[0])

    @property
    def duration(self) -> float:
        return (self.num_frames - 1) / self.fps


@dataclass(frozen=True)
class Trajectory(Timed):
    fps: float
    root_pos: np.ndarray  # [T, 3] pelvis (free joint) position in the world (m)
    root_quat: np.ndarray  # [T, 4] pelvis orientation (w, x, y, z), unit
    joint_pos: np.ndarray  # [T, J] hinge angles (rad) in the model's joint order

    def qpos(self) -> np.ndarray:
        """[T, 7 + J]: MuJoCo's qpos of the free-floating robot."""
        return np.concatenate((self.root_pos, self.root_quat, self.joint_pos), axis=1)


def quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product a b of (w, x, y, z) quaternions, broadcast over leading axes."""
    w1, x1, y1, z1 = np.moveaxis(a, -1, 0)
    w2, x2, y2, z2 = np.moveaxis(b, -1, 0)
    return np.stack((w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                     w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2), axis=-1)


def quat_conj(q: np.ndarray) -> np.ndarray:
    return q * np.array([1.0, -1.0, -1.0, -1.0])


def quat_log(q: np.ndarray) -> np.ndarray:
    """Rotation vector (axis * angle, |angle| <= pi) of unit quaternions [..., 4]."""
    q = np.where(q[..., :1] < 0, -q, q)  # the short way round
    v = q[..., 1:]
    s = np.linalg.norm(v, axis=-1, keepdims=True)
    angle = 2.0 * np.arctan2(s, q[..., :1])
    # angle / s -> 2 as s -> 0 (small rotations): keep the limit instead of dividing by ~0
    scale = np.where(s > 1e-12, angle / np.maximum(s, 1e-12), 2.0)
    return v * scale


def quat_angle(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Angle (rad) of the rotation between unit quaternions a and b."""
    return np.linalg.norm(quat_log(quat_mul(quat_conj(a), b)), axis=-1)


def angular_velocity_world(quat: np.ndarray, dt: float) -> np.ndarray:
    """World-frame angular velocity [T, ..., 3] of a sampled orientation track [T, ..., 4]: the
    rotation from frame k-1 to k+1 (q_{k+1} q_{k-1}^*) over 2 dt, one-sided at the two ends. Exact
    for a constant rate, second order otherwise."""
    w = np.empty(quat.shape[:-1] + (3,))
    if len(quat) < 2:
        return np.zeros_like(w)
    w[1:-1] = quat_log(quat_mul(quat[2:], quat_conj(quat[:-2]))) / (2.0 * dt)
    w[0] = quat_log(quat_mul(quat[1], quat_conj(quat[0]))) / dt
    w[-1] = quat_log(quat_mul(quat[-1], quat_conj(quat[-2]))) / dt
    return w


def nlerp(q0: np.ndarray, q1: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Normalised linear interpolation, the short way round (frames are close, so nlerp and slerp
    agree to well below a milliradian)."""
    q1 = np.where((q0 * q1).sum(-1, keepdims=True) < 0, -q1, q1)
    q = (1.0 - w) * q0 + w * q1
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def frame_blend(num_frames: int, fps: float, new_fps: float) -> tuple[np.ndarray, np.ndarray]:
    """For a resample to new_fps over the same duration: each new frame's source frame i0 (it
    blends i0 and i0 + 1) and weight w of i0 + 1."""
    duration = (num_frames - 1) / fps
    n = int(np.floor(duration * new_fps + 1e-9)) + 1
    s = np.arange(n) / new_fps * fps  # source frame coordinate
    i0 = np.clip(np.floor(s).astype(int), 0, max(num_frames - 2, 0))
    return i0, s - i0


def resample_trajectory(traj: Trajectory, fps: float) -> Trajectory:
    """The trajectory at another frame rate (same duration): lerp for positions and angles,
    nlerp for the root orientation."""
    if abs(fps - traj.fps) < 1e-9:
        return traj
    i0, w = frame_blend(traj.num_frames, traj.fps, fps)
    ww = w[:, None]

    def lerp(a: np.ndarray) -> np.ndarray:
        return (1.0 - ww) * a[i0] + ww * a[i0 + 1]

    return Trajectory(fps=float(fps), root_pos=lerp(traj.root_pos), joint_pos=lerp(traj.joint_pos),
                      root_quat=nlerp(traj.root_quat[i0], traj.root_quat[i0 + 1], ww))
