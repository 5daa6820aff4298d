"""Checks of a clip as read (SourceMotion) against duorl's G1 model, before anything is built.

Each check adds Findings: an error where the clip cannot be used as it is, a warning where it can
(the message says what duorl does instead). The order matters: a clip in degrees or centimetres
makes every kinematic comparison meaningless, so unit and quaternion errors stop the run early.

  fps finite and > 0, a resample to the control rate that keeps the clip, a clip of at least
  MIN_CLIP_SECONDS (every value is a finite real number: the readers refuse anything else); joint
  angles in degrees, positions in centimetres or millimetres; root quaternion norm and order ((w, x, y, z) vs (x, y, z, w): whichever places the stored bodies, or failing those the
  robot on the floor); joints against their limits; stored body arrays against forward kinematics;
  stored velocities against finite differences of the poses (and the fps they imply); speeds the G1
  cannot reach; contact with duorl's flat floor (geoms below it, the robot floating: terrain clips);
  whether the configured action range reaches every frame.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Optional

import numpy as np

from duorl.envs.g1 import model as g1
from duorl.envs.motion.clip import MotionClip
from duorl.envs.motion.findings import ERROR, WARNING, Finding, error, warning
from duorl.envs.motion.fk import ClipKinematics, finite_differences
from duorl.envs.motion.formats import SourceMotion
from duorl.envs.motion.trajectory import Trajectory, quat_angle, quat_conj, quat_mul, resample_trajectory

CONTROL_FPS = 1.0 / (g1.SUBSTEPS * g1.PHYSICS_DT)  # the tracking task resamples every clip to this
QUAT_NORM_WARN, QUAT_NORM_ERROR = 1e-3, 0.1
JOINT_LIMIT_WARN, JOINT_LIMIT_ERROR = 0.02, 0.5  # rad beyond the hard range
MANY_BEYOND, MANY_BEYOND_RAD = 3, 0.1  # so many joints so far beyond: the columns are not these joints
BODY_POS_WARN, BODY_POS_ERROR = 0.02, 0.05  # m, stored body position vs forward kinematics
BODY_ORI_WARN, BODY_ORI_ERROR = 0.1, 0.3  # rad
JOINT_VEL_WARN, LIN_VEL_WARN, ANG_VEL_WARN = 0.2, 0.1, 0.2  # mean disagreement with finite differences
# stored joint rates that another fps explains (ClipChecker._wrong_rate): (cosine, factor) bounds
FPS_FIT_TIGHT, FPS_RATIO_TIGHT = 0.95, 1.25
FPS_FIT_LOOSE, FPS_RATIO_LOOSE = 0.8, 1.5
MIN_CLIP_SECONDS = 1.0  # shorter clips leave episodes too short to learn from (ClipChecker._too_short)
MAX_JOINT_SPEED = 30.0  # rad/s, 99th percentile: beyond any G1 motor
MAX_ROOT_SPEED = 8.0  # m/s, 99th percentile: faster than a sprint
PENETRATION_WARN, PENETRATION_ERROR = 0.01, 0.05  # m below the floor
FLOAT_HEIGHT, FLOAT_SECONDS = 0.05, 1.0  # the lowest point above this for longer than any jump
ROOT_HEIGHT_RANGE = (0.05, 1.5)  # m, a pelvis over flat ground
ROOT_POS_FIELD = {"canonical": "body_pos_w[:, 'pelvis']", "holosoma": "joint_pos[:, 0:3]", "csv": "columns 1-3"}
HAND_BODIES = ("left_wrist_yaw_link", "right_wrist_yaw_link")


@dataclass
class Report:
    source: SourceMotion
    findings: list[Finding] = field(default_factory=list)
    trajectory: Optional[Trajectory] = None  # as interpreted (units fixed, unit quaternions)
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.level == ERROR]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.level == WARNING]


def action_scales(joint_range: np.ndarray) -> dict[str, np.ndarray]:
    """Joint-target offset per unit action under each task.action_range (as G1TaskBase.bind)."""
    q0 = g1.default_joint_pos()
    return {"pd": g1.action_scale(),
            "joint_limits": np.maximum(np.abs(joint_range[:, 0] - q0), np.abs(joint_range[:, 1] - q0))}


def isaac_lab_order(kin: ClipKinematics) -> tuple[np.ndarray, np.ndarray]:
    """Isaac Lab's joint and body order for the model: breadth-first over the body tree (by depth,
    then the model's order), which is how it lists an articulation's links and joints. Returns, for
    each Isaac Lab column, the model's joint index (into kin.joint_names) and body index (kin.body_names)."""
    m = kin.model
    depth = np.zeros(m.nbody, dtype=int)
    for b in range(1, m.nbody):  # parents come before children in MuJoCo's body order
        depth[b] = depth[m.body_parentid[b]] + 1
    bodies = sorted(range(1, m.nbody), key=lambda b: (depth[b], b))
    body_of = {name: int(m.joint(name).bodyid[0]) for name in kin.joint_names}
    joints = sorted(range(len(kin.joint_names)), key=lambda j: (depth[body_of[kin.joint_names[j]]], body_of[kin.joint_names[j]]))
    return np.array(joints), np.array(bodies) - 1


def _runs(mask: np.ndarray) -> tuple[int, int]:
    """(length, start) of the longest run of True."""
    best, start, run = 0, 0, 0
    for i, m in enumerate(mask):
        run = run + 1 if m else 0
        if run > best:
            best, start = run, i - run + 1
    return best, start


class ClipChecker:
    """Runs the checks of the module docstring for one model."""

    def __init__(self, kin: ClipKinematics, action_range: Optional[str] = None) -> None:
        self.kin = kin
        self.joint_range = np.asarray(kin.model.jnt_range[[kin.model.joint(j).id for j in kin.joint_names]])
        self.action_range = action_range

    # -- one check each ------------------------------------------------------------------------
    def _basics(self, s: SourceMotion) -> list[Finding]:
        # (every value is finite and a real number: the readers refuse anything else, motion/formats.py)
        if not np.isfinite(s.fps) or s.fps <= 0:
            out = [error(s.fps_field, f"fps={s.fps:g}, expected a finite number > 0", "a missing or corrupt fps",
                         "pass --fps N (duorl motion import)")]
            return out + ([self._too_short(s, 0.0)] if s.num_frames < 2 else [])
        duration = max(s.num_frames - 1, 0) / s.fps
        kept = int(np.floor(duration * CONTROL_FPS + 1e-9)) + 1
        if s.num_frames < 2:  # (a longer clip that is too short is said after the checks of its motion)
            return [self._too_short(s, duration)]
        if kept < 2:
            return [error(s.fps_field, f"{s.num_frames} frames at fps={s.fps:g} last {duration * 1e3:.3g} ms: resampled to "
                          f"the {CONTROL_FPS:g} Hz control rate that keeps {kept} frame(s)",
                          "fps in the wrong unit (e.g. a frame period or a sample count)",
                          "pass the real frame rate: duorl motion import SRC OUT.npz --fps N")]
        if not 10.0 <= s.fps <= 1000.0:
            return [warning(s.fps_field, f"fps={s.fps:g} is unusual for a motion clip (10 to 1000 expected)",
                            "a wrong frame rate", "check it; pass --fps N to override")]
        return []

    def _length(self, s: SourceMotion) -> list[Finding]:
        """After the checks of the motion: a wrong frame rate (a sped-up clip) is the cause to name first."""
        duration = (s.num_frames - 1) / s.fps
        return [self._too_short(s, duration)] if duration < MIN_CLIP_SECONDS else []

    @staticmethod
    def _too_short(s: SourceMotion, duration: float) -> Finding:
        frames = int(round(MIN_CLIP_SECONDS * CONTROL_FPS)) + 1
        return error(s.joint_field, f"{s.num_frames} frame(s) at fps={s.fps:g} last {duration:.3g} s, under the "
                     f"{MIN_CLIP_SECONDS:g} s a clip needs ({frames} frames at the {CONTROL_FPS:g} Hz control rate): an "
                     "episode starts at a random frame and ends at the clip's last, so a shorter clip leaves episodes of "
                     f"fewer than {frames // 2} steps on average to learn from",
                     "a truncated export, or a stated fps above the recording's",
                     f"use a clip of at least {MIN_CLIP_SECONDS:g} s (duorl motion inspect CLIP prints its duration)")

    def _units(self, s: SourceMotion) -> list[Finding]:
        out = []
        q = s.joint_pos
        biggest = float(np.abs(q).max())
        if biggest > 2 * np.pi + 0.1:
            rad = np.deg2rad(q)
            beyond = np.maximum(self.joint_range[:, 0] - rad, rad - self.joint_range[:, 1]).max()
            cause = ("degrees: divided by 57.3 they lie within the joint limits" if beyond < JOINT_LIMIT_ERROR
                     else "not joint angles (columns shifted, or another layout)")
            out.append(error(s.joint_field, f"joint angles reach {biggest:.4g}, beyond any angle in radians", cause,
                             "write radians" if beyond < JOINT_LIMIT_ERROR else "check the file's layout (docs/motion.md)"))
        z = float(np.median(s.root_pos[:, 2]))
        lo, hi = ROOT_HEIGHT_RANGE
        if not lo <= z <= hi:
            fld = f"{ROOT_POS_FIELD[s.format]} (z)"
            for unit, factor in (("centimetres", 100.0), ("millimetres", 1000.0)):
                if lo <= z / factor <= hi:
                    out.append(error(fld, f"the pelvis is {z:.4g} m above the floor (median), expected {lo} to {hi} m",
                                     f"positions in {unit}", f"divide positions by {factor:g} (write metres)"))
                    break
            else:
                out.append(error(fld, f"the pelvis is {z:.4g} m above the floor (median), expected {lo} to {hi} m",
                                 "a clip recorded on other ground (terrain, a platform) or with another world origin",
                                 "shift it so the robot stands on z=0"))
        return out

    def _quat_norm(self, s: SourceMotion) -> list[Finding]:
        n = np.linalg.norm(s.root_quat, axis=1)
        dev = float(np.abs(n - 1.0).max())
        if dev > QUAT_NORM_ERROR:
            return [error(s.root_quat_field, f"quaternion norms span {n.min():.3g} to {n.max():.3g}, expected 1",
                          "not a quaternion (shifted columns, another layout)", "check the layout (docs/motion.md)")]
        if dev > QUAT_NORM_WARN:
            return [warning(s.root_quat_field, f"quaternion norms span {n.min():.4g} to {n.max():.4g}; normalised",
                            "an export that did not normalise")]
        return []

    def _alternative_order(self, s: SourceMotion, q: np.ndarray) -> np.ndarray:
        """The root quaternion if the file held the other order than its format's."""
        return q[:, [3, 0, 1, 2]] if s.quat_order == "wxyz" else q[:, [1, 2, 3, 0]]

    @staticmethod
    def _sample_frames(traj: Trajectory, n: int = 120) -> np.ndarray:
        """At most n frames spread over the clip: the order checks need no more."""
        return np.unique(np.linspace(0, traj.num_frames - 1, min(n, traj.num_frames)).astype(int))

    def _sample(self, traj: Trajectory) -> Trajectory:
        idx = self._sample_frames(traj)
        return replace(traj, root_pos=traj.root_pos[idx], root_quat=traj.root_quat[idx], joint_pos=traj.joint_pos[idx])

    def _body_error(self, s: SourceMotion, traj: Trajectory) -> float:
        """Median over frames of the mean stored-body position error against kinematics."""
        assert s.bodies is not None
        idx = self._sample_frames(traj)
        pos, _ = self.kin.poses(self._sample(traj))
        cols = [self.kin.body_names.index(b) for b in s.bodies.names]
        return float(np.median(np.linalg.norm(pos[:, cols] - s.bodies.pos[idx], axis=-1).mean(axis=1)))

    def _floor_error(self, traj: Trajectory) -> float:
        """Median over frames of how far the robot's lowest point is from the floor."""
        return float(np.median(np.abs(self.kin.lowest_points(self._sample(traj)).min(axis=1))))

    def _quat_order(self, s: SourceMotion, traj: Trajectory) -> list[Finding]:
        alt = replace(traj, root_quat=self._alternative_order(s, traj.root_quat))
        other = "xyzw" if s.quat_order == "wxyz" else "wxyz"
        spell = {"wxyz": "(w, x, y, z)", "xyzw": "(x, y, z, w)"}
        if s.bodies is not None and len(s.bodies.names) > 3:
            given, swapped, basis = self._body_error(s, traj), self._body_error(s, alt), "the stored body positions"
        else:
            given, swapped, basis = self._floor_error(traj), self._floor_error(alt), "the robot on the floor"
        if given > 0.05 and swapped < 0.5 * given:
            return [error(s.root_quat_field, f"read as {spell[s.quat_order]} (the {s.format} format's order) the root "
                          f"orientation misplaces {basis} by {given:.3g} m (median); read as {spell[other]} by {swapped:.3g} m",
                          f"quaternions stored {spell[other]}", f"write them {spell[s.quat_order]}")]
        return []

    def _unnamed_order(self, s: SourceMotion, traj: Trajectory) -> tuple[SourceMotion, list[Finding]]:
        """A canonical file without names whose bodies do not fit the model's order but fit Isaac
        Lab's (BeyondMimic / whole_body_tracking exports): reordered, with a warning."""
        b = s.bodies
        if s.format != "canonical" or s.joint_names_given or b is None or not b.order_assumed:
            return s, []
        as_is = self._body_error(s, traj)
        if as_is < BODY_POS_WARN:
            return s, []
        joints, bodies = isaac_lab_order(self.kin)
        jm, bm = np.argsort(joints), np.argsort(bodies)  # file column -> model index, inverted
        take = lambda a: None if a is None else a[:, bm]  # noqa: E731
        other = replace(s, joint_pos=s.joint_pos[:, jm], joint_vel=None if s.joint_vel is None else s.joint_vel[:, jm],
                        bodies=replace(b, pos=b.pos[:, bm], quat=b.quat[:, bm], lin_vel=take(b.lin_vel), ang_vel=take(b.ang_vel)))
        if self._body_error(other, replace(traj, joint_pos=other.joint_pos)) < BODY_POS_WARN:
            return other, [warning("joint_pos/body_pos_w", f"no names, and the columns fit Isaac Lab's breadth-first joint and "
                                   f"body order (stored bodies {as_is:.3g} m off in the model's order), not the model's; reordered",
                                   "an Isaac Lab (BeyondMimic / whole_body_tracking) export",
                                   "add joint_names and body_names to be sure")]
        return s, []

    def _joint_limits(self, s: SourceMotion) -> list[Finding]:
        lo, hi = self.joint_range[:, 0], self.joint_range[:, 1]
        beyond = np.maximum(lo - s.joint_pos, s.joint_pos - hi)  # [T, J]
        k, j = np.unravel_index(int(np.argmax(beyond)), beyond.shape)
        worst = float(beyond[k, j])
        where = f"{self.kin.joint_names[j]} is {s.joint_pos[k, j]:.3f} rad at frame {k} (limits [{lo[j]:.3f}, {hi[j]:.3f}])"
        many = [self.kin.joint_names[i] for i in np.flatnonzero(beyond.max(axis=0) > MANY_BEYOND_RAD)]
        if worst > JOINT_LIMIT_ERROR or len(many) >= MANY_BEYOND:
            also = f"; {len(many)} joints beyond by > {MANY_BEYOND_RAD} rad ({', '.join(many[:4])})" if len(many) > 1 else ""
            return [error(s.joint_field, f"{where}: {worst:.3f} rad beyond{also}", "joint columns in another order, or a "
                          "clip of another robot", "match joints by name (joint_names / a header row) or retarget to the G1")]
        if worst > JOINT_LIMIT_WARN:
            return [warning(s.joint_field, f"{where}: {worst:.3f} rad beyond; the robot stops at its limit",
                            "a retargeter that ignores the limits")]
        return []

    def _stored_bodies(self, s: SourceMotion, clip: MotionClip, stats: dict[str, Any]) -> list[Finding]:
        if s.bodies is None or not s.bodies.names:
            return []
        cols = [self.kin.body_names.index(b) for b in s.bodies.names]
        pos_err = np.linalg.norm(clip.body_pos_w[:, cols] - s.bodies.pos, axis=-1)  # [T, B]
        qs = s.bodies.quat / np.maximum(np.linalg.norm(s.bodies.quat, axis=-1, keepdims=True), 1e-12)
        ori_err = quat_angle(clip.body_quat_w[:, cols], qs)
        stats["body_pos_error_m"] = {"mean": float(pos_err.mean()), "max": float(pos_err.max())}
        stats["body_ori_error_rad"] = {"mean": float(ori_err.mean()), "max": float(ori_err.max())}
        b = int(np.argmax(pos_err.max(axis=0)))
        where = f"{s.bodies.names[b]} off by {pos_err[:, b].max():.3g} m"
        if pos_err.max() > BODY_POS_ERROR or ori_err.max() > BODY_ORI_ERROR:
            if s.bodies.order_assumed:
                cause = "bodies or joints in another order than the model's (Isaac Lab orders them breadth-first)"
            elif not s.joint_names_given:
                cause = "joint columns in another order than the model's, or another robot model"
            else:
                cause = "another robot model, or body arrays that do not belong to these joint angles"
            return [error("body_pos_w/body_quat_w", f"stored bodies disagree with forward kinematics of the root pose and "
                          f"joint angles on duorl's G1 ({where}; orientation up to {ori_err.max():.3g} rad)", cause,
                          "name the joints (joint_names) or export the clip for this model")]
        if pos_err.max() > BODY_POS_WARN or ori_err.max() > BODY_ORI_WARN:
            return [warning("body_pos_w/body_quat_w", f"stored bodies differ from forward kinematics on duorl's G1 ({where}); "
                            "recomputed", "a slightly different G1 model")]
        return []

    def _velocities(self, s: SourceMotion, traj: Trajectory, clip: MotionClip, stats: dict[str, Any]) -> list[Finding]:
        out: list[Finding] = []
        fd = finite_differences(traj)
        if s.joint_vel is not None:
            g, d = s.joint_vel, fd.joint_vel
            gd, dd = float((g * d).sum()), float((d * d).sum())
            k = gd / max(dd, 1e-12)  # the least-squares factor: stored rates ~ k x the differences
            fit = gd / max(float(np.sqrt((g * g).sum() * dd)), 1e-12)  # how well any factor explains them (cosine)
            err = float(np.abs(g - d).mean())
            stats["joint_vel_error_rad_s"] = err
            stats["joint_vel_fps_fit"] = s.fps * k if fit > 0 else None
            if np.abs(d).max() > 1e-3 and k > 0 and self._wrong_rate(k, fit):
                out.append(error("joint_vel", f"the stored rates are {k:.3g} x the finite differences of joint_pos at "
                                 f"fps={s.fps:g} (they disagree by {err:.3g} rad/s on average): they fit {s.fps * k:.4g} "
                                 f"fps, not {s.fps:g}", f"the stated fps is wrong ({s.fps_field}), or frames were dropped "
                                 "without changing it (a sped-up clip)",
                                 f"pass the clip's real frame rate: duorl motion import SRC OUT.npz --fps {s.fps * k:.4g}"))
                return out
            if err > JOINT_VEL_WARN or (err > 0.01 and err > 0.5 * float(np.abs(d).mean())):  # or wrong by half the motion
                out.append(warning("joint_vel", f"stored rates disagree with finite differences of joint_pos by {err:.3g} "
                                   "rad/s on average; finite differences used"))
        if s.root_ang_vel_w is not None:
            world = float(np.abs(s.root_ang_vel_w - fd.root_ang_vel_w).mean())
            v = np.concatenate((np.zeros((traj.num_frames, 1)), fd.root_ang_vel_w), axis=1)
            local = quat_mul(quat_mul(quat_conj(traj.root_quat), v), traj.root_quat)[:, 1:]
            body = float(np.abs(s.root_ang_vel_w - local).mean())
            stats["root_ang_vel_error_rad_s"] = world
            if world > ANG_VEL_WARN and body < 0.5 * world:
                out.append(warning(s.root_vel_field, f"the stored root angular velocity is in the body frame ({body:.3g} rad/s "
                                   f"from finite differences there, {world:.3g} in the world frame the {s.format} format "
                                   "uses); recomputed"))
            elif world > ANG_VEL_WARN:
                out.append(warning(s.root_vel_field, f"the stored root angular velocity disagrees with the orientations by "
                                   f"{world:.3g} rad/s on average; recomputed"))
        if s.bodies is not None and s.bodies.lin_vel is not None and s.bodies.ang_vel is not None and s.bodies.names:
            cols = [self.kin.body_names.index(b) for b in s.bodies.names]
            lin = float(np.linalg.norm(s.bodies.lin_vel - clip.body_lin_vel_w[:, cols], axis=-1).mean())
            ang = float(np.linalg.norm(s.bodies.ang_vel - clip.body_ang_vel_w[:, cols], axis=-1).mean())
            stats["body_vel_error"] = {"lin_m_s": lin, "ang_rad_s": ang}
            if lin > LIN_VEL_WARN or ang > ANG_VEL_WARN:
                out.append(warning("body_lin_vel_w/body_ang_vel_w", f"stored body velocities disagree with the poses by "
                                   f"{lin:.3g} m/s and {ang:.3g} rad/s on average; recomputed from finite differences"))
        speed = float(np.percentile(np.abs(fd.joint_vel), 99))
        root = float(np.percentile(np.linalg.norm(fd.root_lin_vel, axis=1), 99))
        stats["joint_speed_p99_rad_s"], stats["root_speed_p99_m_s"] = speed, root
        if speed > MAX_JOINT_SPEED or root > MAX_ROOT_SPEED:
            out.append(error(s.fps_field, f"at fps={s.fps:g} the clip moves its joints at {speed:.3g} rad/s and its root at "
                             f"{root:.3g} m/s (99th percentiles), beyond the G1 ({MAX_JOINT_SPEED:g} rad/s, {MAX_ROOT_SPEED:g} m/s)",
                             "a stated fps higher than the recording's", "pass the real frame rate: --fps N"))
        return out

    @staticmethod
    def _wrong_rate(k: float, fit: float) -> bool:
        """Stored joint rates that are k x the finite differences, with `fit` the cosine between them:
        another frame rate than the stated one explains them. A close fit needs only a factor beyond
        FPS_RATIO_TIGHT; a clip sped up by dropping frames samples its motion coarsely, so there the
        differences follow the rates only loosely (a cosine of 0.89 to 0.92 at every 10th frame of
        holosoma's clips: benchmarks/2026-12-02_clip_fps_fit/) and the factor must be beyond FPS_RATIO_LOOSE. Zeros, noise or rates of other
        joints do not fit at all and stay a warning."""
        off = max(k, 1.0 / k)
        return (fit >= FPS_FIT_TIGHT and off > FPS_RATIO_TIGHT) or (fit >= FPS_FIT_LOOSE and off > FPS_RATIO_LOOSE)

    def _floor(self, s: SourceMotion, traj: Trajectory, stats: dict[str, Any]) -> list[Finding]:
        kin, m = self.kin, self.kin.model
        low = kin.lowest_points(traj)  # [T, G]
        body_of = [m.body(int(m.geom_bodyid[g])).name for g in kin.geoms]
        feet = np.array([n in g1.FEET_BODIES for n in body_of])
        hands = np.array([n in HAND_BODIES for n in body_of])
        ground, foot = low.min(axis=1), low[:, feet].min(axis=1)
        stats["lowest_point_m"] = ground
        stats["foot_height_m"] = foot
        stats["hand_height_m"] = low[:, hands].min(axis=1) if hands.any() else None
        out = []
        k, g = np.unravel_index(int(np.argmin(low)), low.shape)
        depth = -float(low[k, g])
        where = f"{body_of[g]} {depth * 100:.1f} cm below the floor at frame {k} (feet {foot[k] * 100:.1f} cm above it there)"
        if depth > PENETRATION_ERROR:
            out.append(error("body poses", where, "a clip on other ground (a slope, stairs, a platform): duorl's tracking "
                             "task has a flat floor at z=0", "use a flat-ground clip"))
        elif depth > PENETRATION_WARN:
            out.append(warning("body poses", f"{where}; the floor will push the robot out", "retargeting error"))
        run, start = _runs(ground > FLOAT_HEIGHT)
        if run / s.fps > FLOAT_SECONDS:
            out.append(error("body poses", f"the whole robot is more than {FLOAT_HEIGHT * 100:g} cm above the floor for "
                             f"{run / s.fps:.2f} s from frame {start} (lowest point {ground[start:start + run].min() * 100:.1f} cm, "
                             f"feet up to {foot[start:start + run].max() * 100:.1f} cm)", "a clip on other ground (terrain, a "
                             "platform) or with a raised world origin", "use a flat-ground clip, or shift it down to z=0"))
        return out

    def _reach(self, s: SourceMotion, stats: dict[str, Any]) -> list[Finding]:
        q = np.clip(s.joint_pos, self.joint_range[:, 0], self.joint_range[:, 1])  # the robot cannot go beyond
        reach = {}
        for name, scale in action_scales(self.joint_range).items():
            a = np.abs(q - g1.default_joint_pos()) / scale
            j = int(np.argmax(a.max(axis=0)))
            reach[name] = {"max_abs_action": float(a.max()), "joint": self.kin.joint_names[j],
                           "frames_beyond": float((a.max(axis=1) > 1.0 + 1e-6).mean())}
        stats["reach"] = reach
        r = reach.get(self.action_range or "")
        if r is not None and r["max_abs_action"] > 1.0 + 1e-6:
            return [warning("joint angles", f"under task.action_range={self.action_range} {r['frames_beyond'] * 100:.0f}% of "
                            f"frames need |action| > 1 (up to {r['max_abs_action']:.2f}, {r['joint']}): the policy cannot "
                            "command those poses", fix="task.action_range=joint_limits (g1_motion_tracking's default)")]
        return []

    # -- all of them ---------------------------------------------------------------------------
    def check(self, s: SourceMotion) -> tuple[Report, Optional[MotionClip]]:
        """The report and, when it has no error, the canonical clip at the source's frame rate."""
        rep = Report(s, list(s.findings))
        rep.stats.update(format=s.format, frames=s.num_frames, fps=s.fps, fps_field=s.fps_field)
        for step in (self._basics, self._units, self._quat_norm):
            rep.findings += step(s)
            if rep.errors:
                return rep, None
        quat = s.root_quat / np.linalg.norm(s.root_quat, axis=1, keepdims=True)
        traj = Trajectory(float(s.fps), s.root_pos, quat, s.joint_pos)
        s, found = self._unnamed_order(s, traj)
        rep.findings += found
        rep.source = s
        traj = replace(traj, joint_pos=s.joint_pos)
        rep.trajectory = traj
        rep.stats["duration_s"] = traj.duration
        rep.findings += self._quat_order(s, traj)
        if rep.errors:
            return rep, None
        rep.findings += self._joint_limits(s)
        rep.stats["joint_min"], rep.stats["joint_max"] = s.joint_pos.min(axis=0), s.joint_pos.max(axis=0)
        rep.stats["joint_range"] = self.joint_range
        clip = self.kin.build(traj)
        rep.findings += self._stored_bodies(s, clip, rep.stats)
        rep.findings += self._velocities(s, traj, clip, rep.stats)
        rep.findings += self._floor(s, traj, rep.stats)
        rep.findings += self._reach(s, rep.stats)
        rep.findings += self._length(s)
        return rep, None if rep.errors else clip


def clip_at(kin: ClipKinematics, traj: Trajectory, fps: Optional[float]) -> MotionClip:
    """The canonical clip of `traj` resampled (trajectory first, then kinematics) to fps."""
    return kin.build(traj if fps is None else resample_trajectory(traj, fps))
