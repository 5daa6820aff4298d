"""A physically sensible G1 reference clip, made from scratch (no download, deterministic).

The robot stays in double support with both feet planted flat where the standing pose puts them,
and moves everything else: a slow squat, a lateral and fore-aft weight shift, a pelvis twist, waist
motion, arm swings and raises, wrist turns. Each motion is a sum of sinusoids faded in from the
standing pose with a quintic ramp, so positions, velocities and accelerations are continuous and
frame 0 is the standing pose at rest. The leg joints come from exact inverse kinematics (Newton on
MuJoCo's body Jacobians, warm-started frame to frame) so the feet do not move or tilt; amplitudes
keep every joint inside its range and within reach of the policy's action scale, and the centre of
mass over the feet. Velocities are finite differences of the sampled trajectory (joints, root)
and body arrays follow from it through MuJoCo's own kinematics (motion/fk.py, as for every loaded
clip), so the clip is consistent: a robot in the clip's joint/root state has exactly the clip's
body poses and velocities.
"""

from __future__ import annotations

import math
import sys
import time
from typing import Optional

import mujoco
import numpy as np

from duorl.envs.g1 import model as g1
from duorl.envs.motion.clip import MotionClip
from duorl.envs.motion.fk import ClipKinematics, finite_differences
from duorl.envs.motion.trajectory import Trajectory

DEFAULT_SECONDS = 10.0
DEFAULT_FPS = 50.0
RAMP_SECONDS = 1.0
LEGS = (g1.JOINT_NAMES[0:6], g1.JOINT_NAMES[6:12])


def _ramp(t: np.ndarray) -> np.ndarray:
    s = np.clip(t / RAMP_SECONDS, 0.0, 1.0)
    return s**3 * (10.0 - 15.0 * s + 6.0 * s**2)  # quintic: C2 at both ends


def _wave(t: np.ndarray, amp: float, period: float, phase: float = 0.0) -> np.ndarray:
    return amp * np.sin(2.0 * math.pi * t / period + phase)


def _bump(t: np.ndarray, amp: float, period: float) -> np.ndarray:
    """0 at t=0, up to amp and back: amp * (1 - cos) / 2."""
    return amp * 0.5 * (1.0 - np.cos(2.0 * math.pi * t / period))


def _quat_yaw_pitch(yaw: np.ndarray, pitch: np.ndarray) -> np.ndarray:
    """R = Rz(yaw) Ry(pitch) as (w, x, y, z)."""
    cy, sy, cp, sp = np.cos(yaw / 2), np.sin(yaw / 2), np.cos(pitch / 2), np.sin(pitch / 2)
    return np.stack((cy * cp, -sy * sp, cy * sp, sy * cp), axis=-1)


def _upper_body(t: np.ndarray, e: np.ndarray) -> dict[str, np.ndarray]:
    """Offsets from the standing pose for waist and arm joints (rad)."""
    out: dict[str, np.ndarray] = {
        "waist_yaw_joint": _wave(t, 0.25, 5.0, 0.7),
        "waist_roll_joint": _wave(t, 0.06, 3.5),
        "waist_pitch_joint": _wave(t, 0.08, 4.5, 1.1),
    }
    for side, sign, ph in (("left", 1.0, 0.0), ("right", -1.0, math.pi)):
        out[f"{side}_shoulder_pitch_joint"] = _wave(t, 0.35, 2.5, ph)
        out[f"{side}_shoulder_roll_joint"] = sign * _bump(t, 0.3, 3.0)
        out[f"{side}_shoulder_yaw_joint"] = _wave(t, 0.2, 4.0, ph)
        out[f"{side}_elbow_joint"] = _wave(t, 0.35, 2.0, ph + 0.5)
        out[f"{side}_wrist_roll_joint"] = _wave(t, 0.3, 3.0, ph)
        out[f"{side}_wrist_pitch_joint"] = _wave(t, 0.06, 2.2, ph)
        out[f"{side}_wrist_yaw_joint"] = _wave(t, 0.06, 2.7, ph + 1.0)
    return {k: e * v for k, v in out.items()}


def _pelvis(t: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    pos = np.stack(
        (
            e * _wave(t, 0.015, 5.0),
            e * _wave(t, 0.035, 3.0),
            g1.ROOT_HEIGHT - e * _bump(t, 0.04, 4.0),
        ),
        axis=-1,
    )
    quat = _quat_yaw_pitch(e * _wave(t, 0.12, 6.0), e * _bump(t, 0.05, 4.0))
    return pos, quat


class _LegIK:
    """Places each foot body at a fixed world pose by moving its leg's 6 joints (Newton steps)."""

    def __init__(self, m: mujoco.MjModel, d: mujoco.MjData) -> None:
        self.m, self.d = m, d
        self.feet = [m.body(b).id for b in g1.FEET_BODIES]
        self.qadr = [np.array([m.joint(j).qposadr[0] for j in leg]) for leg in LEGS]
        self.dadr = [np.array([m.joint(j).dofadr[0] for j in leg]) for leg in LEGS]
        mujoco.mj_kinematics(m, d)
        self.target_pos = [d.xpos[b].copy() for b in self.feet]
        self.target_mat = [d.xmat[b].reshape(3, 3).copy() for b in self.feet]

    def solve(self, iters: int = 50, tol: float = 1e-10) -> float:
        m, d = self.m, self.d
        jacp, jacr = np.zeros((3, m.nv)), np.zeros((3, m.nv))
        err_norm = 0.0
        for _ in range(iters):
            mujoco.mj_kinematics(m, d)
            mujoco.mj_comPos(m, d)  # the Jacobians read cdof, which mj_comPos computes
            err_norm = 0.0
            for k, b in enumerate(self.feet):
                e_pos = self.target_pos[k] - d.xpos[b]
                r_err = self.target_mat[k] @ d.xmat[b].reshape(3, 3).T  # world-frame rotation error
                q = np.zeros(4)
                mujoco.mju_mat2Quat(q, r_err.reshape(-1))
                e_rot = np.zeros(3)
                mujoco.mju_quat2Vel(e_rot, q, 1.0)
                err = np.concatenate((e_pos, e_rot))
                err_norm = max(err_norm, float(np.abs(err).max()))
                mujoco.mj_jacBody(m, d, jacp, jacr, b)
                J = np.vstack((jacp[:, self.dadr[k]], jacr[:, self.dadr[k]]))
                d.qpos[self.qadr[k]] += np.linalg.solve(J.T @ J + 1e-9 * np.eye(6), J.T @ err)
            if err_norm < tol:
                break
        return err_norm


def synthesize(model: Optional[mujoco.MjModel] = None, seconds: float = DEFAULT_SECONDS,
               fps: float = DEFAULT_FPS) -> MotionClip:
    """The synthetic clip for the G1 training model (see the module docstring)."""
    m = model if model is not None else g1.load()
    d = mujoco.MjData(m)
    n = int(round(seconds * fps)) + 1
    t = np.arange(n) / fps
    e = _ramp(t)

    q_default = g1.default_joint_pos()
    joint_pos = np.tile(q_default, (n, 1))
    for name, offset in _upper_body(t, e).items():
        joint_pos[:, g1.JOINT_NAMES.index(name)] += offset
    root_pos, root_quat = _pelvis(t, e)

    d.qpos[:] = g1.default_qpos()
    ik = _LegIK(m, d)
    leg_idx = np.array([g1.JOINT_NAMES.index(j) for leg in LEGS for j in leg])
    t_report = time.monotonic() + PROGRESS_S
    for k in range(n):
        if time.monotonic() >= t_report:  # long work says how far it is
            print(f"duorl: motion synth: frame {k:,} of {n:,}", file=sys.stderr, flush=True)
            t_report += PROGRESS_S
        d.qpos[0:3], d.qpos[3:7] = root_pos[k], root_quat[k]
        # the legs start from the previous frame's solution (d.qpos keeps it)
        residual = ik.solve()
        if residual > 1e-6:
            raise RuntimeError(f"leg IK did not converge at frame {k} (residual {residual:.2e})")
        joint_pos[k, leg_idx] = d.qpos[7 + leg_idx]

    traj = Trajectory(fps=float(fps), root_pos=root_pos, root_quat=root_quat, joint_pos=joint_pos)
    rates = finite_differences(traj)
    # the standing start is at rest exactly (the ramp's derivative vanishes there)
    for v in (rates.joint_vel, rates.root_lin_vel, rates.root_ang_vel_w):
        v[0] = 0.0
    return ClipKinematics(m).build(traj, rates).validate("synthetic clip")


# the longest clip `duorl motion synth` writes: one hour at 50 fps. Measured on the 2-core dev machine under
# other agents' load (benchmarks/2026-12-02_fault_round4_cpu/bad_input.md): 60 s in 2.4 s (5.4 MB), 3600 s in
# 108 s; beyond it a typo (--seconds 1e9) asked for a 373 GiB array, and --seconds 100000 ran 20 minutes unsaid
MAX_FRAMES = 180_001
PROGRESS_S = 10.0  # a long synthesis says how far it is this often


def synth_command(out: str, seconds: float = DEFAULT_SECONDS, fps: float = DEFAULT_FPS,
                  robot_xml: Optional[str] = None) -> int:
    """`duorl motion synth OUT.npz`: write the synthetic clip. Exit code."""
    from duorl.config.errors import ConfigError
    from duorl.envs.motion.clip import save_clip

    from duorl.envs.motion.checks import MIN_CLIP_SECONDS

    if not (math.isfinite(seconds) and seconds >= MIN_CLIP_SECONDS and math.isfinite(fps) and fps > 0):
        print(f"error: --seconds={seconds:g} --fps={fps:g}: a clip lasts at least {MIN_CLIP_SECONDS:g} s (a shorter one "
              "cannot train: docs/motion.md) at a frame rate > 0. Fix: e.g. --seconds 10 --fps 50", file=sys.stderr)
        return 2
    frames = int(round(seconds * fps)) + 1
    if frames > MAX_FRAMES:
        longest = (MAX_FRAMES - 1) / fps
        print(f"error: --seconds={seconds:g} --fps={fps:g}: {frames:,} frames, more than the {MAX_FRAMES:,} a "
              f"synthetic clip may have (one hour at 50 fps; docs/motion.md). Fix: --seconds {longest:g} or less at "
              f"--fps {fps:g}", file=sys.stderr)
        return 2
    try:
        clip = synthesize(g1.load(robot_xml), seconds, fps)
    except ConfigError as e:  # no G1 model: the message names every way to provide one
        print(f"error: {e}", file=sys.stderr)
        return 2
    save_clip(out, clip)
    print(f"wrote {out}: {clip.num_frames} frames at {clip.fps:g} fps ({clip.duration:.2f} s), "
          f"{clip.body_pos_w.shape[1]} bodies, {clip.joint_pos.shape[1]} joints")
    return 0
