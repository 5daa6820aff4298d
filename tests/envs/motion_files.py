"""Test clips in each published layout, written from one known canonical clip (tests write their own
files; no third-party data). `arrays` is the canonical clip as a dict of numpy arrays."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from duorl.envs.g1 import model as g1
from duorl.envs.motion.clip import ARRAYS, MotionClip
from duorl.envs.motion.fk import ClipKinematics
from duorl.envs.motion.trajectory import Trajectory, quat_mul

BODY = ("body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w")
# a joint order that is not the model's (left/right hip pitch swapped, arms first): files that name
# their joints are read by name
PERMUTED = np.array([6, 1, 2, 3, 4, 5, 0, *range(7, 12), *range(15, 29), 12, 13, 14])


def canonical_arrays(clip: MotionClip) -> dict[str, np.ndarray]:
    out = {k: np.asarray(getattr(clip, k), dtype=np.float64).copy() for k in ARRAYS}
    out["fps"] = np.array([clip.fps])
    out["body_names"] = np.array(clip.body_names)
    return out


def write_canonical(path: Path, a: dict[str, np.ndarray], names: bool = True, permute: bool = False) -> Path:
    a = dict(a)
    if permute:
        a["joint_pos"], a["joint_vel"] = a["joint_pos"][:, PERMUTED], a["joint_vel"][:, PERMUTED]
        a["joint_names"] = np.array(g1.JOINT_NAMES)[PERMUTED]
    elif names:
        a["joint_names"] = np.array(g1.JOINT_NAMES)
    with open(path, "wb") as f:
        np.savez(f, **a)
    return path


def write_isaac_lab(path: Path, a: dict[str, np.ndarray], kin: ClipKinematics) -> Path:
    """A BeyondMimic / whole_body_tracking export: canonical arrays in Isaac Lab's breadth-first joint
    and body order, without names."""
    from duorl.envs.motion.checks import isaac_lab_order

    joints, bodies = isaac_lab_order(kin)
    out = {k: v for k, v in a.items() if k != "body_names"}
    out["joint_pos"], out["joint_vel"] = a["joint_pos"][:, joints], a["joint_vel"][:, joints]
    out.update({k: a[k][:, bodies] for k in BODY})
    with open(path, "wb") as f:
        np.savez(f, **out)
    return path


def write_holosoma(path: Path, a: dict[str, np.ndarray], permute: bool = True) -> Path:
    """holosoma's layout: root in joint_pos[:, :7] (w, x, y, z) and joint_vel[:, :6] (world frame),
    body arrays of its own model with 'world' first, joint and body names."""
    j = PERMUTED if permute else np.arange(g1.NUM_JOINTS)
    root_pos, root_quat = a["body_pos_w"][:, 0], a["body_quat_w"][:, 0]
    root_lin, root_ang = a["body_lin_vel_w"][:, 0], a["body_ang_vel_w"][:, 0]
    t = len(root_pos)
    world = {"body_pos_w": np.zeros((t, 1, 3)), "body_quat_w": np.tile([1.0, 0, 0, 0], (t, 1, 1)),
             "body_lin_vel_w": np.zeros((t, 1, 3)), "body_ang_vel_w": np.zeros((t, 1, 3))}
    out = {k: np.concatenate((world[k], a[k]), axis=1) for k in BODY}
    out.update(fps=np.array([int(a["fps"][0])]), joint_names=np.array(g1.JOINT_NAMES)[j],
               body_names=np.array(["world", *a["body_names"]]),
               joint_pos=np.concatenate((root_pos, root_quat, a["joint_pos"][:, j]), axis=1),
               joint_vel=np.concatenate((root_lin, root_ang, a["joint_vel"][:, j]), axis=1))
    with open(path, "wb") as f:
        np.savez(f, **out)
    return path


def write_csv(path: Path, a: dict[str, np.ndarray], header: bool = False, quat_order: str = "xyzw",
              scale: float = 1.0) -> Path:
    """mjlab's converter / LAFAN1 layout: root position, root quaternion (x, y, z, w), joints."""
    q = a["body_quat_w"][:, 0]
    q = q[:, [1, 2, 3, 0]] if quat_order == "xyzw" else q
    j = PERMUTED if header else np.arange(g1.NUM_JOINTS)
    rows = np.concatenate((a["body_pos_w"][:, 0] * scale, q, a["joint_pos"][:, j]), axis=1)
    head = ",".join(["x", "y", "z", "qx", "qy", "qz", "qw", *np.array(g1.JOINT_NAMES)[j]]) if header else ""
    np.savetxt(path, rows, delimiter=",", fmt="%.10g", header=head, comments="")
    if not header:  # savetxt writes an empty first line for an empty header
        path.write_text(path.read_text().lstrip("\n"))
    return path


def lively_clip(model, clip: MotionClip, spin: float = 0.0) -> MotionClip:
    """`clip` with the left leg swung forward (left and right hip pitch differ by up to 0.6 rad) and,
    with spin (rad/s), the pelvis pitched 0.3 rad and turning about the world z axis: motions whose
    joint order and angular-velocity frame matter. Consistent (kinematics + finite differences)."""
    t = np.arange(clip.num_frames) / clip.fps
    q = clip.joint_pos.copy()
    q[:, 0] -= 0.6 * np.sin(np.pi * t / t[-1]) ** 2
    root = clip.body_quat_w[:, 0]
    if spin:
        yaw = np.stack((np.cos(spin * t / 2), 0 * t, 0 * t, np.sin(spin * t / 2)), axis=1)
        pitch = np.array([np.cos(0.15), 0.0, np.sin(0.15), 0.0])
        root = quat_mul(yaw, quat_mul(np.broadcast_to(pitch, root.shape), root))
    traj = Trajectory(clip.fps, clip.body_pos_w[:, 0], root, q)
    return ClipKinematics(model).build(traj)
