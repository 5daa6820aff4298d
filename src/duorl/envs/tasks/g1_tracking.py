"""`g1_motion_tracking`: the G1 tracks a reference clip with its whole body (BeyondMimic-style).

The clip comes from `task.motion_file` (the canonical .npz, holosoma's .npz or the mjlab/LAFAN1
.csv layout: envs/motion/formats.py; checked by envs/motion/checks.py; docs/motion.md), else it is
the synthetic clip (`duorl motion synth`, made in memory), so no download is ever needed. Its root
pose and joint angles are resampled to the 50 Hz control rate; body poses and velocities are
recomputed on this model. Episodes start at a random frame (uniform), from the clip's state there
(exactly, with reset_noise=False; otherwise plus small pose/velocity/joint noise, joints kept within
their range or the reference's), and end when the robot strays (terminated), the clip ends or 10 s
pass (truncated).

Actions: task.action_range=joint_limits by default here: +-1 reaches the joint limit farther from
the standing pose, so every pose of any clip inside the limits is reachable (under pd, 0.25 *
effort / kp, real clips need |a| up to 4-6).

Tracked bodies (14, the common G1 set): pelvis, hip_roll, knee, ankle_roll links, torso_link (the
anchor), shoulder_roll, elbow, wrist_yaw links. Time: after reset the robot is at clip frame t and
the observation shows the target frame t+1; an action moves it toward t+1, where it is rewarded.

Actor observation (160): target joint pos (29) and vel (29), target anchor position (3) and
orientation (first two columns of the rotation matrix, 6) in the robot's anchor frame, pelvis
linear and angular velocity in its frame (3 + 3), joint pos - standing pose (29), joint vel (29),
last action (29). Critic (286): target joints (58), anchor pose (9), the 14 robot bodies' positions
(42) and orientations (84) in the robot's anchor frame, pelvis velocities (6), joints (58), action (29).

Reward per step, weight * term * control dt (the published terms and widths):
  anchor_pos  0.5  exp(-|anchor pos error|^2 / 0.3^2)
  anchor_ori  0.5  exp(-anchor angle error^2 / 0.4^2)
  body_pos    1.0  exp(-mean body pos error^2 / 0.3^2)    bodies relative to the anchor, heading aligned
  body_ori    1.0  exp(-mean body angle error^2 / 0.4^2)
  body_lin_vel 1.0 exp(-mean |lin vel error|^2 / 1.0^2)   world frame
  body_ang_vel 1.0 exp(-mean |ang vel error|^2 / 3.14^2)
  action_rate -0.1 |p_t - p_{t-1}|^2, p the policy's output tanh(mean) behind each action
  joint_limit -10  summed excursion beyond 90% of each joint's range, widened per frame to
                   include the reference's own angle (following the clip is never penalised)
Terminations: anchor height off by > 0.25 m, anchor tilt differing by > 0.8 (projected gravity z),
or an end effector (ankles, wrists) off in height by > 0.25 m.

Diagnostics (Task/<name>, Eval/<name> with training.eval_envs; per step, mean over envs):
  body_pos_error    mean tracked-body position error (m), bodies re-anchored as in body_pos
  anchor_pos_error  torso position error in the world (m)
  end_clip          1 where an episode ends at the clip's end this step (not by a deviation)
  end_deviation     1 where it ends by a deviation termination
so end_clip / (end_clip + end_deviation) is the share of episode ends that reached the clip's end
(for clips up to the 10 s episode limit, which ends longer ones without a flag).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np
import torch

from duorl.envs import quat as Q
from duorl.envs.base import EnvSpec, Obs, Uniforms
from duorl.envs.g1 import model as g1
from duorl.envs.kinematics import BodyKinematics, Frames
from duorl.envs.motion.clip import MotionClip, resample
from duorl.envs.tasks.g1_common import G1TaskBase

NAME = "g1_motion_tracking"
EPISODE_SECONDS = 10.0
TRACKED_BODIES: tuple[str, ...] = (
    "pelvis", "left_hip_roll_link", "left_knee_link", "left_ankle_roll_link",
    "right_hip_roll_link", "right_knee_link", "right_ankle_roll_link", "torso_link",
    "left_shoulder_roll_link", "left_elbow_link", "left_wrist_yaw_link",
    "right_shoulder_roll_link", "right_elbow_link", "right_wrist_yaw_link",
)
ANCHOR = TRACKED_BODIES.index(g1.ANCHOR_BODY)
ROOT = TRACKED_BODIES.index(g1.ROOT_BODY)
END_EFFECTORS = [TRACKED_BODIES.index(b) for b in
                 ("left_ankle_roll_link", "right_ankle_roll_link", "left_wrist_yaw_link", "right_wrist_yaw_link")]
NB = len(TRACKED_BODIES)
METRIC_NAMES = ("body_pos_error", "anchor_pos_error", "end_clip", "end_deviation")
NJ = g1.NUM_JOINTS
ACTOR_OBS = 2 * NJ + 3 + 6 + 3 + 3 + 3 * NJ  # 160
CRITIC_OBS = 2 * NJ + 3 + 6 + 3 * NB + 6 * NB + 3 + 3 + 3 * NJ  # 286

WEIGHTS = {
    "anchor_pos": 0.5, "anchor_ori": 0.5, "body_pos": 1.0, "body_ori": 1.0,
    "body_lin_vel": 1.0, "body_ang_vel": 1.0, "action_rate": -0.1, "joint_limit": -10.0,
}
STD = {"anchor_pos": 0.3, "anchor_ori": 0.4, "body_pos": 0.3, "body_ori": 0.4, "body_lin_vel": 1.0, "body_ang_vel": 3.14}
MAX_ANCHOR_Z = 0.25
MAX_ANCHOR_TILT = 0.8
MAX_EE_Z = 0.25
# reset noise around the clip's state (x, y, z, roll, pitch, yaw), published ranges
POSE_NOISE = (0.05, 0.05, 0.01, 0.1, 0.1, 0.2)
VEL_NOISE = (0.5, 0.5, 0.2, 0.52, 0.52, 0.78)
JOINT_NOISE = 0.1
SOFT_LIMIT = 0.9

_SYNTH_CACHE: dict[str, MotionClip] = {}


def default_clip(xml_path: Path) -> MotionClip:
    """The synthetic clip for this model file (made once per process)."""
    key = str(Path(xml_path).resolve())
    if key not in _SYNTH_CACHE:
        from duorl.envs.motion.synth import synthesize

        _SYNTH_CACHE[key] = synthesize(g1.build_model(xml_path))
    return _SYNTH_CACHE[key]


def _rot6(q: torch.Tensor) -> torch.Tensor:
    """First two columns of the rotation matrix, flattened (a continuous orientation encoding)."""
    return Q.to_matrix(q)[..., :2].flatten(-2)


def _euler_quat(rpy: torch.Tensor) -> torch.Tensor:
    """Rz(yaw) Ry(pitch) Rx(roll) as a quaternion, rpy [..., 3]."""
    half = 0.5 * rpy
    cr, cp, cy = torch.cos(half).unbind(-1)
    sr, sp, sy = torch.sin(half).unbind(-1)
    return torch.stack((cr * cp * cy + sr * sp * sy, sr * cp * cy - cr * sp * sy,
                        cr * sp * cy + sr * cp * sy, cr * cp * sy - sr * sp * cy), dim=-1)


class G1MotionTracking(G1TaskBase):
    """See the module docstring; implements `tasks.base.Task`."""

    _STATE = G1TaskBase._STATE + ("frame",)
    # reset(): a start frame 1, root pose noise 6, root velocity noise 6, joint noise 29
    uniforms_per_step = 1 + 6 + 6 + NJ

    def __init__(self, max_episode_steps: Optional[int] = None, robot_xml: Optional[str] = None,
                 motion_file: Optional[str] = None, randomize: bool = True, reset_noise: bool = True,
                 action_range: str = "joint_limits") -> None:
        super().__init__(robot_xml, randomize, action_range)
        steps = round(EPISODE_SECONDS / self.control_dt) if max_episode_steps is None else int(max_episode_steps)
        if steps < 1:
            raise ValueError(f"task.max_episode_steps must be >= 1, got {steps}")
        if motion_file is not None and not Path(motion_file).expanduser().is_file():
            from duorl.config.errors import ConfigError

            raise ConfigError("task.motion_file", motion_file, "no such file", "a motion clip .npz (see envs/motion/clip.py) or null",
                              "give an existing file, or null for the synthetic clip (`duorl motion synth OUT.npz` writes it)")
        self.motion_file = motion_file
        self.reset_noise = reset_noise
        self.spec = EnvSpec(task=NAME, actor_obs_dim=ACTOR_OBS, critic_obs_dim=CRITIC_OBS, action_dim=NJ,
                            max_episode_steps=steps, control_dt=self.control_dt, metric_names=METRIC_NAMES)

    def load_clip(self) -> MotionClip:
        """The clip at the control rate. A file goes through motion/load.py (any supported format,
        checked, bodies and velocities recomputed on this model); duorl train's checks ran them
        before anything was built, so an error here means the file changed since."""
        if not self.motion_file:
            return resample(default_clip(self.xml_path), 1.0 / self.control_dt)
        from duorl.envs.motion.findings import MotionFileError
        from duorl.envs.motion.load import config_error, load_motion

        try:
            clip, _ = load_motion(Path(self.motion_file).expanduser(), self.host_model(), 1.0 / self.control_dt)
        except MotionFileError as e:
            raise config_error(e, self.motion_file) from None
        return clip

    def bind(self, num_envs: int, device: torch.device) -> None:
        super().bind(num_envs, device)
        dev = self._device
        m = self.host_model()
        clip = self.load_clip()
        model_bodies = [m.body(b).name for b in range(1, m.nbody)]
        cols = clip.body_columns(model_bodies, TRACKED_BODIES)

        def t(x: np.ndarray) -> torch.Tensor:
            return torch.as_tensor(np.ascontiguousarray(x), dtype=torch.float32, device=dev)

        self.clip_frames = clip.num_frames
        self.ref_joint_pos, self.ref_joint_vel = t(clip.joint_pos), t(clip.joint_vel)
        self.ref_pos, self.ref_quat = t(clip.body_pos_w[:, cols]), t(clip.body_quat_w[:, cols])
        self.ref_lin_vel, self.ref_ang_vel = t(clip.body_lin_vel_w[:, cols]), t(clip.body_ang_vel_w[:, cols])
        self._fk = BodyKinematics(m, [self.body_id(b) for b in TRACKED_BODIES], dev)
        self.frame = torch.zeros(num_envs, dtype=torch.long, device=dev)  # the clip frame the robot should be at
        lo, hi = self.joint_range[:, 0], self.joint_range[:, 1]
        mid, half = 0.5 * (lo + hi), 0.5 * (hi - lo) * SOFT_LIMIT
        # per frame, the soft range widened to hold the reference (retargeters drive joints such as
        # ankle roll and waist pitch to their limits): following the clip costs no penalty
        self._soft_lo = torch.minimum(mid - half, self.ref_joint_pos)  # [T, J]
        self._soft_hi = torch.maximum(mid + half, self.ref_joint_pos)
        # where a reset may put a joint: the hard range, widened likewise (the clip itself is never moved)
        self._reset_lo, self._reset_hi = torch.minimum(lo, self.ref_joint_pos), torch.maximum(hi, self.ref_joint_pos)
        self._pose_noise = torch.tensor(POSE_NOISE, dtype=torch.float32, device=dev)
        self._vel_noise = torch.tensor(VEL_NOISE, dtype=torch.float32, device=dev)
        # an index tensor made once: indexing with a Python list copies it to the device every step
        self._ee_idx = torch.tensor(END_EFFECTORS, dtype=torch.long, device=dev)

    # -- Task protocol -------------------------------------------------------------------------
    def reset(self, mask: torch.Tensor, rng: Uniforms) -> tuple[torch.Tensor, torch.Tensor]:
        n = self._num_envs
        # a start frame with at least one frame after it
        start = (self._uniform(rng, n) * (self.clip_frames - 1)).long().clamp_max(self.clip_frames - 2)
        pose = self._uniform(rng, n, 6, lo=-self._pose_noise, hi=self._pose_noise)
        vel = self._uniform(rng, n, 6, lo=-self._vel_noise, hi=self._vel_noise)
        jnoise = self._uniform(rng, n, NJ, lo=-JOINT_NOISE, hi=JOINT_NOISE)
        if not self.reset_noise:
            pose, vel, jnoise = pose * 0.0, vel * 0.0, jnoise * 0.0

        root_quat = Q.mul(_euler_quat(pose[:, 3:]), self.ref_quat[start, ROOT])
        ang_w = self.ref_ang_vel[start, ROOT] + vel[:, 3:]
        qj = torch.maximum(torch.minimum(self.ref_joint_pos[start] + jnoise, self._reset_hi[start]), self._reset_lo[start])
        qpos = torch.cat((self.ref_pos[start, ROOT] + pose[:, :3], root_quat, qj), dim=1)
        qvel = torch.cat((self.ref_lin_vel[start, ROOT] + vel[:, :3], Q.rotate_inv(root_quat, ang_w),
                          self.ref_joint_vel[start]), dim=1)
        self.frame.copy_(torch.where(mask, start, self.frame))
        self.reset_actions(mask)
        return qpos, qvel

    def reference_qpos(self, env: int = 0) -> torch.Tensor:
        """[nq] the clip's state at env's current frame (root pose, joints): what play draws."""
        k = self.frame[env]
        return torch.cat((self.ref_pos[k, ROOT], self.ref_quat[k, ROOT], self.ref_joint_pos[k]))

    def apply_action(self, actions: torch.Tensor, policy_actions: Optional[torch.Tensor] = None) -> torch.Tensor:
        self.frame.add_(1).clamp_(max=self.clip_frames - 1)  # the frame this action should reach
        return super().apply_action(actions, policy_actions)

    def truncated(self, sim) -> torch.Tensor:
        """The clip has no frame after the current one: the episode is cut (not a failure)."""
        return self.frame >= self.clip_frames - 1

    def _anchor_relative(self, k: torch.Tensor, r_pos: torch.Tensor, r_quat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Target anchor position [N, 3] and orientation (6) in the robot anchor's frame."""
        a_pos, a_quat = r_pos[:, ANCHOR], r_quat[:, ANCHOR]
        pos_b = Q.rotate_inv(a_quat, self.ref_pos[k, ANCHOR] - a_pos)
        rel = Q.mul(Q.conj(a_quat), self.ref_quat[k, ANCHOR])
        return pos_b, _rot6(rel)

    def observe(self, sim) -> Obs:
        qpos, qvel = self._state(sim)
        return self._observe(self._fk(qpos), qpos, qvel)

    def _observe(self, f: Frames, qpos: torch.Tensor, qvel: torch.Tensor) -> Obs:
        k = (self.frame + 1).clamp_max(self.clip_frames - 1)  # the next target
        anchor_pos_b, anchor_ori_b = self._anchor_relative(k, f.pos, f.quat)
        root_quat = qpos[:, 3:7]
        base = (Q.rotate_inv(root_quat, qvel[:, 0:3]), qvel[:, 3:6])
        robot = (qpos[:, 7:] - self.q_default, qvel[:, 6:], self.last_action)
        command = (self.ref_joint_pos[k], self.ref_joint_vel[k])
        actor = torch.cat((*command, anchor_pos_b, anchor_ori_b, *base, *robot), dim=1)
        a_pos, a_quat = f.pos[:, ANCHOR : ANCHOR + 1], f.quat[:, ANCHOR : ANCHOR + 1]
        body_pos_b = Q.rotate_inv(a_quat.expand_as(f.quat), f.pos - a_pos).flatten(1)
        body_ori_b = _rot6(Q.mul(Q.conj(a_quat).expand_as(f.quat), f.quat)).flatten(1)
        critic = torch.cat((*command, anchor_pos_b, anchor_ori_b, body_pos_b, body_ori_b, *base, *robot), dim=1)
        return {"actor": actor, "critic": critic}

    def reference_bodies(self, k: torch.Tensor, r_pos: torch.Tensor, r_quat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Target body positions and orientations re-anchored on the robot: the clip's bodies
        relative to its anchor, turned to the robot anchor's heading and placed at the robot
        anchor's x, y (the clip's anchor height). Tracking posture, not absolute drift."""
        ref_a_pos, ref_a_quat = self.ref_pos[k, ANCHOR], self.ref_quat[k, ANCHOR]
        turn = Q.yaw_quat(Q.mul(r_quat[:, ANCHOR], Q.conj(ref_a_quat))).unsqueeze(1)
        origin = torch.cat((r_pos[:, ANCHOR, :2], ref_a_pos[:, 2:]), dim=1).unsqueeze(1)
        pos = origin + Q.rotate(turn.expand(-1, NB, -1), self.ref_pos[k] - ref_a_pos.unsqueeze(1))
        quat = Q.mul(turn.expand(-1, NB, -1), self.ref_quat[k])
        return pos, quat

    def reward_terms(self, sim) -> dict[str, torch.Tensor]:
        """Each term's raw value [N] (before weight and dt)."""
        qpos, qvel = self._state(sim)
        return self._reward_terms(self._fk(qpos, qvel), qpos)

    def _reward_terms(self, f: Frames, qpos: torch.Tensor) -> dict[str, torch.Tensor]:
        assert f.lin_vel is not None and f.ang_vel is not None
        k = self.frame
        rel_pos, rel_quat = self.reference_bodies(k, f.pos, f.quat)

        def kernel(err: torch.Tensor, name: str) -> torch.Tensor:
            return torch.exp(-err / STD[name] ** 2)

        return {
            "anchor_pos": kernel((self.ref_pos[k, ANCHOR] - f.pos[:, ANCHOR]).square().sum(-1), "anchor_pos"),
            "anchor_ori": kernel(Q.angle_between(self.ref_quat[k, ANCHOR], f.quat[:, ANCHOR]).square(), "anchor_ori"),
            "body_pos": kernel((rel_pos - f.pos).square().sum(-1).mean(-1), "body_pos"),
            "body_ori": kernel(Q.angle_between(rel_quat, f.quat).square().mean(-1), "body_ori"),
            "body_lin_vel": kernel((self.ref_lin_vel[k] - f.lin_vel).square().sum(-1).mean(-1), "body_lin_vel"),
            "body_ang_vel": kernel((self.ref_ang_vel[k] - f.ang_vel).square().sum(-1).mean(-1), "body_ang_vel"),
            "action_rate": self.action_rate(),
            "joint_limit": self._beyond_reference_limits(qpos[:, 7:], k),
        }

    def _beyond_reference_limits(self, qj: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """Summed excursion beyond the soft limits (90% of each joint's range), widened at frame k
        to wherever the reference itself is."""
        return (self._soft_lo[k] - qj).clamp_min(0.0).sum(dim=1) + (qj - self._soft_hi[k]).clamp_min(0.0).sum(dim=1)

    def metrics(self, sim) -> torch.Tensor:
        """[N, 4] the diagnostics of the module docstring, in METRIC_NAMES order (post-step state)."""
        qpos, _ = self._state(sim)
        f = self._fk(qpos)
        rel_pos, _ = self.reference_bodies(self.frame, f.pos, f.quat)
        deviation = self._terminated(f)
        end_clip = self.truncated(sim) & ~deviation
        return torch.stack(((rel_pos - f.pos).norm(dim=-1).mean(dim=1),
                            (self.ref_pos[self.frame, ANCHOR] - f.pos[:, ANCHOR]).norm(dim=-1),
                            end_clip.float(), deviation.float()), dim=1)

    def _weighted(self, terms: dict[str, torch.Tensor]) -> torch.Tensor:
        total = torch.zeros_like(terms["anchor_pos"])
        for name, w in WEIGHTS.items():
            total = total + (w * self.control_dt) * terms[name]
        return total

    def reward(self, sim) -> torch.Tensor:
        return self._weighted(self.reward_terms(sim))

    def terminated(self, sim) -> torch.Tensor:
        qpos, _ = self._state(sim)
        return self._terminated(self._fk(qpos))

    def _terminated(self, f: Frames) -> torch.Tensor:
        k = self.frame
        anchor_z = (self.ref_pos[k, ANCHOR, 2] - f.pos[:, ANCHOR, 2]).abs() > MAX_ANCHOR_Z
        tilt = (Q.gravity_in(self.ref_quat[k, ANCHOR])[:, 2] - Q.gravity_in(f.quat[:, ANCHOR])[:, 2]).abs() > MAX_ANCHOR_TILT
        rel_pos, _ = self.reference_bodies(k, f.pos, f.quat)
        ee_idx = self._ee_idx
        ee = (rel_pos.index_select(1, ee_idx)[..., 2] - f.pos.index_select(1, ee_idx)[..., 2]).abs().amax(dim=1) > MAX_EE_Z
        return anchor_z | tilt | ee

    def evaluate(self, sim) -> tuple[torch.Tensor, torch.Tensor, Obs]:
        """reward, terminated and observe of the post-step state from one kinematics pass."""
        qpos, qvel = self._state(sim)
        f = self._fk(qpos, qvel)
        return self._weighted(self._reward_terms(f, qpos)), self._terminated(f), self._observe(f, qpos, qvel)

