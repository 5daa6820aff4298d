"""`g1_walk_flat`: Unitree G1 velocity tracking on flat ground (the FastSAC G1 locomotion task).

Control at 50 Hz (physics dt 0.005, 4 substeps), joint-position targets around the standing pose.
A command (vx, vy in the heading frame, yaw rate) is drawn at reset and redrawn every 10 s; 20% of
draws are "stand still" (all zero). A gait clock (0.8-1.2 Hz, the feet in antiphase) paces the feet.

Actor observation (98): gyro * 0.25 (3), projected gravity (3), command (3), joint pos - standing
pose (29), joint vel * 0.05 (29), last action (29), sin/cos of the left foot's gait phase (2).
Critic observation (101): the pelvis' linear velocity in its own frame * 2 (3), then the actor's.

Reward per step: the published FastSAC G1 terms, each weight * term * control dt:
  track_lin_vel   2.0   exp(-|cmd_xy - v_xy|^2 / 0.25), v in the heading frame
  track_ang_vel   1.5   exp(-(cmd_yaw - yaw rate)^2 / 0.25)
  ang_vel_xy     -1.0   |pelvis angular velocity xy|^2
  orientation   -10.0   |projected gravity xy|^2
  action_rate    -2.0   |p_t - p_{t-1}|^2, p the policy's own output tanh(mean) behind each action
                        (as published for FastSAC: exploration noise is not penalised)
  feet_phase      5.0   exp(-sum_feet (foot height - gait height(phase))^2 / 0.008), 9 cm swing
  pose           -0.5   sum_j w_j (q_j - q_default_j)^2 (legs loose, waist and arms stiff)
  close_feet    -10.0   1 where the feet are closer than 15 cm sideways
  feet_ori       -5.0   sum_feet |projected gravity xy in the foot frame|
  alive          10.0   1
Penalty curriculum (task.penalty_curriculum): the negative-weight terms are scaled by s. Every control
step s shrinks by a factor (1 - degree) while the running mean length of finished episodes (over about
the last 1000) is below 15% of the maximum, grows by (1 + degree) above 75%, and stays within
[floor, 1]. Two published G1 schedules (holosoma's g1 curriculum presets):
  ppo (the default): start 0.1, floor 0,   degree 0.00025 (their PPO G1 experiment's);
  fastsac:           start 0.5, floor 0.5, degree 0.001 (their FastSAC G1 experiment's);
  off:               s = 1 throughout.
ppo is the default because it tracked best of the two published schedules (fastsac reaches full
penalties so early that the policy learns to stand still); with less exploration noise (this task's
sac defaults in task/g1_walk_flat.yaml) ppo keeps the tracking at full penalty weight. The runs behind
both choices: docs/benchmarks.md, "G1 walking".
Logged per step (Task/rew_<term>): each term's contribution to the reward, weight * dt * term, the
penalties times s, averaged over the exploring envs (Eval/rew_<term>: over the deterministic ones).
Mirror (EnvSpec.mirror, walk_mirror): the task is symmetric about the robot's sagittal plane, so a
transition's left-right mirror image is another transition of it; FastSAC adds it to every batch
(algo.use_symmetry, on for sac in this task's YAML, as published).
Terminations: pelvis tilted more than 70 degrees, pelvis below 0.4 m, or spinning faster than 20
rad/s (falls). Episodes last 20 s (1000 steps).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import torch

from duorl.envs import quat as Q
from duorl.envs.base import EnvSpec, Mirror, Obs, Uniforms
from duorl.envs.g1 import model as g1
from duorl.envs.kinematics import BodyKinematics
from duorl.envs.tasks.g1_common import G1TaskBase, root_yaw_quat, wrap_angle

NAME = "g1_walk_flat"
EPISODE_SECONDS = 20.0
COMMAND_SECONDS = 10.0  # commands are redrawn this often within an episode
CMD_LO = (-1.0, -1.0, -1.0)  # vx, vy (m/s), yaw rate (rad/s)
CMD_HI = (1.0, 1.0, 1.0)
STAND_PROB = 0.2
STAND_EPS = 0.01  # below this a command counts as "stand still": both feet planted (phase pi)
GAIT_FREQ = (0.8, 1.2)  # Hz
SWING_HEIGHT = 0.09
RESET_JOINT_SCALE = (0.5, 1.5)  # initial joints = standing pose * U(0.5, 1.5)
RESET_DROP = 0.01  # the lowest foot starts this high above the floor

ACTOR_OBS = 98
CRITIC_OBS = 101

WEIGHTS = {
    "track_lin_vel": 2.0,
    "track_ang_vel": 1.5,
    "ang_vel_xy": -1.0,
    "orientation": -10.0,
    "action_rate": -2.0,
    "feet_phase": 5.0,
    "pose": -0.5,
    "close_feet": -10.0,
    "feet_ori": -5.0,
    "alive": 10.0,
}
# Task/<name>: the walking criterion's two errors, the penalty scale, then each reward term's
# contribution (weight * dt * term, penalties times the scale), in WEIGHTS order
METRIC_NAMES = ("lin_vel_error", "ang_vel_error", "penalty_scale", *(f"rew_{k}" for k in WEIGHTS))


@dataclass(frozen=True)
class PenaltyCurriculum:
    """The penalty scale's schedule (module docstring): where it starts, its floor and ceiling, and the
    factor step per control step."""

    init: float
    floor: float
    ceiling: float
    degree: float


PENALTY_CURRICULA: dict[str, Optional[PenaltyCurriculum]] = {
    "ppo": PenaltyCurriculum(init=0.1, floor=0.0, ceiling=1.0, degree=0.00025),
    "fastsac": PenaltyCurriculum(init=0.5, floor=0.5, ceiling=1.0, degree=0.001),
    "off": None,
}
DEFAULT_PENALTY_CURRICULUM = "ppo"
PENALTY_DOWN, PENALTY_UP = 0.15, 0.75  # of the maximum episode length (150 and 750 of 1000 steps)
EPISODE_AVERAGE_OVER = 1000  # finished episodes in the running mean of episode lengths
TRACK_SIGMA = 0.25
FEET_PHASE_SIGMA = 0.008
CLOSE_FEET = 0.15
# per joint, JOINT_NAMES order: legs (hip pitch, roll, yaw, knee, ankle pitch, roll) x 2, then
# waist and arms; the published G1 weights
POSE_WEIGHTS = [0.01, 1.0, 5.0, 0.01, 5.0, 5.0] * 2 + [50.0] * 17
MAX_TILT = math.radians(70.0)
MIN_PELVIS_Z = 0.4
MAX_ANG_VEL = 20.0


def walk_mirror() -> Mirror:
    """The task's left-right mirror (module docstring's layout): angular velocity (a pseudovector)
    keeps y and flips x and z; gravity and linear velocity flip y; the command flips vy and the yaw
    rate; joints swap sides (g1.joint_mirror); the mirrored left foot is the right one, half a gait
    cycle on, so sin and cos of its phase flip. Rewards are mirror-invariant (pose weights, feet and
    tracking terms are symmetric), so a mirrored transition is one of this task."""
    j_index, j_sign = g1.joint_mirror()
    index: list[int] = []
    sign: list[float] = []

    def block(idx: tuple[int, ...], sgn: tuple[float, ...]) -> None:
        start = len(index)
        index.extend(start + i for i in idx)
        sign.extend(sgn)

    block((0, 1, 2), (-1.0, 1.0, -1.0))  # gyro
    block((0, 1, 2), (1.0, -1.0, 1.0))  # projected gravity
    block((0, 1, 2), (1.0, -1.0, -1.0))  # command vx, vy, yaw rate
    for _ in range(3):  # joint positions, joint velocities, last action
        block(j_index, j_sign)
    block((0, 1), (-1.0, -1.0))  # sin, cos of the left foot's gait phase
    actor = (tuple(index), tuple(sign))
    critic = ((0, 1, 2) + tuple(3 + i for i in index), (1.0, -1.0, 1.0) + tuple(sign))
    return Mirror(actor_obs=actor, critic_obs=critic, action=(j_index, j_sign))


def expected_foot_height(phase: torch.Tensor, swing: float = SWING_HEIGHT) -> torch.Tensor:
    """Foot height the gait clock asks for: 0 at phase +-pi, a cubic Bezier up to `swing` at 0."""
    x = (phase + math.pi) / (2.0 * math.pi)

    def bezier(y0: float, y1: float, s: torch.Tensor) -> torch.Tensor:
        return y0 + (y1 - y0) * (s**3 + 3.0 * s**2 * (1.0 - s))

    return torch.where(x <= 0.5, bezier(0.0, swing, 2.0 * x), bezier(swing, 0.0, 2.0 * x - 1.0))


class G1WalkFlat(G1TaskBase):
    """See the module docstring; implements `tasks.base.Task`."""

    _STATE = G1TaskBase._STATE + ("command", "phase", "gait_freq", "steps", "penalty_scale",
              "mean_episode_length")
    # advance(): a command (3 + 1); reset(): yaw 1, joint scale 29, a command 4, phase 1, gait frequency 1
    uniforms_per_step = 4 + (1 + g1.NUM_JOINTS + 4 + 1 + 1)

    def __init__(self, max_episode_steps: Optional[int] = None, robot_xml: Optional[str] = None,
                 randomize: bool = True, reset_noise: bool = True,
                 penalty_curriculum: str = DEFAULT_PENALTY_CURRICULUM, action_range: str = "pd") -> None:
        super().__init__(robot_xml, randomize, action_range)
        if penalty_curriculum not in PENALTY_CURRICULA:
            raise ValueError(f"task.penalty_curriculum={penalty_curriculum!r}: allowed {', '.join(PENALTY_CURRICULA)}")
        self.penalty_curriculum = PENALTY_CURRICULA[penalty_curriculum]
        steps = round(EPISODE_SECONDS / self.control_dt) if max_episode_steps is None else int(max_episode_steps)
        if steps < 1:
            raise ValueError(f"task.max_episode_steps must be >= 1, got {steps}")
        self.reset_noise = reset_noise
        self.spec = EnvSpec(task=NAME, actor_obs_dim=ACTOR_OBS, critic_obs_dim=CRITIC_OBS,
                            action_dim=g1.NUM_JOINTS, max_episode_steps=steps, control_dt=self.control_dt,
                            metric_names=METRIC_NAMES,
                            mirror=walk_mirror())
        self.command_steps = round(COMMAND_SECONDS / self.control_dt)

    def bind(self, num_envs: int, device: torch.device) -> None:
        super().bind(num_envs, device)
        dev, f32 = self._device, dict(dtype=torch.float32, device=self._device)
        m = self.host_model()
        self._feet = BodyKinematics(m, [self.body_id(b) for b in g1.FEET_BODIES], dev)
        self._site_off = torch.as_tensor(m.site_pos[list(self.layout.foot_sites)], **f32)  # [2, 3]
        self.command = torch.zeros(num_envs, 3, **f32)
        self.phase = torch.zeros(num_envs, **f32)  # left foot; the right foot is at phase + pi
        self.gait_freq = torch.ones(num_envs, **f32)
        self.steps = torch.zeros(num_envs, dtype=torch.long, device=dev)
        self.pose_weights = torch.tensor(POSE_WEIGHTS, **f32)
        self._cmd_lo = torch.tensor(CMD_LO, **f32)
        self._cmd_hi = torch.tensor(CMD_HI, **f32)
        self._zero_root = torch.tensor([0.0, 0.0, g1.ROOT_HEIGHT], **f32)
        # the penalty curriculum's state (module docstring): device scalars, updated without a sync
        init = self.penalty_curriculum.init if self.penalty_curriculum is not None else 1.0
        self.penalty_scale = torch.full((), init, **f32)
        self.mean_episode_length = torch.zeros((), **f32)

    # -- command and clock ---------------------------------------------------------------------
    def _draw_commands(self, rng: Uniforms) -> torch.Tensor:
        n = self._num_envs
        cmd = self._uniform(rng, n, 3, lo=self._cmd_lo, hi=self._cmd_hi)
        stand = rng.rand(n, 1) < STAND_PROB
        return cmd.masked_fill(stand, 0.0)

    def standing(self) -> torch.Tensor:
        return (self.command[:, :2].norm(dim=1) < STAND_EPS) & (self.command[:, 2].abs() < STAND_EPS)

    def gait_phases(self) -> torch.Tensor:
        """[N, 2] phases of the left and right foot; both pi (planted) under a stand command."""
        both = torch.stack((self.phase, wrap_angle(self.phase + math.pi)), dim=1)
        return torch.where(self.standing().unsqueeze(1), torch.full_like(both, math.pi), both)

    # -- Task protocol -------------------------------------------------------------------------
    def reset(self, mask: torch.Tensor, rng: Uniforms) -> tuple[torch.Tensor, torch.Tensor]:
        n, dev = self._num_envs, self._device
        yaw = self._uniform(rng, n, lo=-math.pi, hi=math.pi)
        scale = self._uniform(rng, n, g1.NUM_JOINTS, lo=RESET_JOINT_SCALE[0], hi=RESET_JOINT_SCALE[1])
        cmd = self._draw_commands(rng)
        phase0 = self._uniform(rng, n, lo=-math.pi, hi=math.pi)
        freq = self._uniform(rng, n, lo=GAIT_FREQ[0], hi=GAIT_FREQ[1])
        if not self.reset_noise:
            yaw, scale = torch.zeros_like(yaw), torch.ones_like(scale)

        qj = self.q_default * scale
        qpos = torch.cat((self._zero_root.expand(n, 3), root_yaw_quat(yaw), qj), dim=1)
        # lift or lower the robot so that its lowest foot is RESET_DROP above the floor
        foot_z = self.foot_sites(qpos)[0][..., 2].min(dim=1).values
        qpos[:, 2] += RESET_DROP - foot_z
        qvel = torch.zeros(n, self.nv, dtype=torch.float32, device=dev)

        self.command.copy_(self._masked(mask, cmd, self.command))
        self.phase.copy_(self._masked(mask, phase0, self.phase))
        self.gait_freq.copy_(self._masked(mask, freq, self.gait_freq))
        self.track_episode_lengths(mask)
        self.steps.masked_fill_(mask, 0)
        self.reset_actions(mask)
        return qpos, qvel

    def track_episode_lengths(self, ended: torch.Tensor) -> None:
        """Running mean of the lengths (control steps) of the episodes ending now (none: unchanged)."""
        count = ended.sum()
        total = torch.where(ended, self.steps, 0).sum()
        mean_now = total.float() / count.clamp_min(1).float()
        w = count.clamp_max(EPISODE_AVERAGE_OVER).float() / EPISODE_AVERAGE_OVER
        self.mean_episode_length.add_(w * (mean_now - self.mean_episode_length))

    def update_penalty_scale(self) -> None:
        c = self.penalty_curriculum
        if c is None:
            return
        max_len = float(self.spec.max_episode_steps)
        avg = self.mean_episode_length
        factor = torch.where(avg < PENALTY_DOWN * max_len, 1.0 - c.degree,
                             torch.where(avg > PENALTY_UP * max_len, 1.0 + c.degree, 1.0))
        self.penalty_scale.copy_((self.penalty_scale * factor).clamp(c.floor, c.ceiling))

    def apply_action(self, actions: torch.Tensor, policy_actions: Optional[torch.Tensor] = None) -> torch.Tensor:
        # the state this action leads to is one control step later: advance the clock with it
        self.steps += 1
        self.phase.copy_(wrap_angle(self.phase + 2.0 * math.pi * self.control_dt * self.gait_freq))
        return super().apply_action(actions, policy_actions)

    def advance(self, sim, rng: Uniforms) -> None:
        """After rewards and terminations: redraw the command every COMMAND_SECONDS (the next
        observation shows it; the reward just computed used the old one)."""
        self.update_penalty_scale()
        redraw = (self.steps % self.command_steps) == 0
        # drawn for every env every step, so the random stream never depends on which envs redraw
        self.command.copy_(self._masked(redraw, self._draw_commands(rng), self.command))

    def observe(self, sim) -> Obs:
        qpos, qvel = self._state(sim)
        quat = qpos[:, 3:7]
        phase = self.phase.unsqueeze(1)
        actor = torch.cat(
            (
                qvel[:, 3:6] * 0.25,  # the free joint's angular velocity is in the pelvis frame: a gyro
                Q.gravity_in(quat),
                self.command,
                qpos[:, 7:] - self.q_default,
                qvel[:, 6:] * 0.05,
                self.last_action,
                torch.sin(phase),
                torch.cos(phase),
            ),
            dim=1,
        )
        lin_local = Q.rotate_inv(quat, qvel[:, 0:3])
        return {"actor": actor, "critic": torch.cat((lin_local * 2.0, actor), dim=1)}

    def foot_sites(self, qpos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """World positions [N, 2, 3] of the sole sites and orientations [N, 2, 4] of the feet."""
        f = self._feet(qpos)
        return f.pos + Q.rotate(f.quat, self._site_off.expand_as(f.pos)), f.quat

    def reward_terms(self, sim) -> dict[str, torch.Tensor]:
        """Each term's raw value [N] (before weight and dt)."""
        qpos, qvel = self._state(sim)
        quat = qpos[:, 3:7]
        ang_local = qvel[:, 3:6]
        heading = Q.yaw_quat(quat)
        v_heading = Q.rotate_inv(heading, qvel[:, 0:3])
        yaw_rate = Q.rotate(quat, ang_local)[:, 2]
        gravity = Q.gravity_in(quat)
        feet_pos, feet_quat = self.foot_sites(qpos)
        target_z = expected_foot_height(self.gait_phases())
        feet_err = (feet_pos[..., 2] - target_z).square().sum(dim=1)
        rel = Q.rotate_inv(heading, feet_pos[:, 0] - feet_pos[:, 1])  # left - right, heading frame
        feet_gravity = Q.gravity_in(feet_quat)[..., :2].norm(dim=-1).sum(dim=1)
        return {
            "track_lin_vel": torch.exp(-(self.command[:, :2] - v_heading[:, :2]).square().sum(dim=1) / TRACK_SIGMA),
            "track_ang_vel": torch.exp(-(self.command[:, 2] - yaw_rate).square() / TRACK_SIGMA),
            "ang_vel_xy": ang_local[:, :2].square().sum(dim=1),
            "orientation": gravity[:, :2].square().sum(dim=1),
            "action_rate": self.action_rate(),
            "feet_phase": torch.exp(-feet_err / FEET_PHASE_SIGMA),
            "pose": (self.pose_weights * (qpos[:, 7:] - self.q_default).square()).sum(dim=1),
            "close_feet": (rel[:, 1].abs() < CLOSE_FEET).float(),
            "feet_ori": feet_gravity,
            "alive": torch.ones_like(gravity[:, 0]),
        }

    def metrics(self, sim) -> torch.Tensor:
        """[N, len(METRIC_NAMES)]: |command_xy - base velocity_xy| (m/s, heading frame), |command_yaw -
        yaw rate| (rad/s) (the tracking errors the walking criterion reads: Task/lin_vel_error,
        Task/ang_vel_error), the penalty curriculum's scale (Task/penalty_scale), then each reward
        term's contribution to this step's reward (Task/rew_<term>; they sum to the reward)."""
        return self.reward_and_metrics(sim)[1]

    def reward_and_metrics(self, sim) -> tuple[torch.Tensor, torch.Tensor]:
        """reward(sim) and metrics(sim) from one evaluation of the reward terms (the VecEnv's step
        uses this: the terms are hundreds of small ops)."""
        contributions = self._contributions(sim)
        qpos, qvel = self._state(sim)
        quat = qpos[:, 3:7]
        v_heading = Q.rotate_inv(Q.yaw_quat(quat), qvel[:, 0:3])
        yaw_rate = Q.rotate(quat, qvel[:, 3:6])[:, 2]
        lin = (self.command[:, :2] - v_heading[:, :2]).norm(dim=1)
        metrics = torch.stack((lin, (self.command[:, 2] - yaw_rate).abs(), self.penalty_scale.expand_as(lin),
                               *contributions), dim=1)
        return torch.stack(contributions, dim=0).sum(dim=0), metrics

    def _contributions(self, sim) -> list[torch.Tensor]:
        """Each term's share of the reward [N], in WEIGHTS order: weight * dt * term, the penalties
        (negative weights) times the curriculum's scale."""
        terms = self.reward_terms(sim)
        out = []
        for name, w in WEIGHTS.items():
            c = (w * self.control_dt) * terms[name]
            out.append(c * self.penalty_scale if w < 0 else c)
        return out

    def reward(self, sim) -> torch.Tensor:
        return torch.stack(self._contributions(sim), dim=0).sum(dim=0)

    def terminated(self, sim) -> torch.Tensor:
        qpos, qvel = self._state(sim)
        up = -Q.gravity_in(qpos[:, 3:7])[:, 2]  # cos(tilt)
        spin = qvel[:, 3:6].norm(dim=1)
        return (up < math.cos(MAX_TILT)) | (qpos[:, 2] < MIN_PELVIS_Z) | (spin > MAX_ANG_VEL)
