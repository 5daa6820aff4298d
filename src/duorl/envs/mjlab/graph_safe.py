"""Host-sync-free versions of the mjlab 1.6 methods whose stretch of the step would otherwise read the
device on the host, each computing bitwise what mjlab's own computes.

mjlab selects rows by index lists it reads from the device (`mask.nonzero()`, `if mask.any():`,
`x[mask] = y`); the versions here select the same rows with `torch.where` on the mask. Every element is
computed by the same elementwise ops on the same values, so the results are equal bit for bit (the tests
of envs/mjlab compare the staged step against mjlab's own, which these replace only inside it), and no
op sizes its output by a device value: the stretch can be captured.

  UniformVelocityCommand._update_command   heading control, world-frame envs, standing envs (per step)
  UniformVelocityCommand._resample_command the forward-only envs among those resampled (drawing the same
                                           numbers in the same order as mjlab's)
  RayCastSensor._extract_yaw_rotation      the fallback to the Y axis at +-90 degrees pitch (per sense)

`install(env)` binds them on the env's instances (the classes stay mjlab's) and returns what it bound.

The reset of the done envs (ManagerBasedRlEnv._reset_idx) is captured once per number of done envs; three
of its managers' resets read values to the host only for their logs, so the staged step calls these
versions instead, which change the same state and log device tensors instead of Python floats:

  reset_events        EventManager.apply(mode="reset") with the env step count from a device scalar
  command_reset       CommandManager.reset (the velocity command's: CommandTerm.reset)
  termination_reset   TerminationManager.reset
"""

from __future__ import annotations

import types
from typing import Any

import torch


def _velocity_update_command(self: Any, env_ids: torch.Tensor | None = None) -> None:
    """UniformVelocityCommand._update_command without index lists (mjlab 1.6: velocity_command.py)."""
    from mjlab.utils.lab_api.math import wrap_to_pi

    del env_ids  # a pure function of the current state, as mjlab's: every env is refreshed
    cfg = self.cfg
    vel_b = self.vel_command_b
    if cfg.heading_command:
        self.heading_error = wrap_to_pi(self.heading_target - self.robot.data.heading_w)
        yaw_rate = torch.clip(cfg.heading_control_stiffness * self.heading_error,
                              min=cfg.ranges.ang_vel_z[0], max=cfg.ranges.ang_vel_z[1])
        vel_b[:, 2] = torch.where(self.is_heading_env, yaw_rate, vel_b[:, 2])
    # world-frame envs: their world-frame linear velocity rotated into the body frame
    heading = self.robot.data.heading_w
    cos_h, sin_h = torch.cos(heading), torch.sin(heading)
    vx_w, vy_w = self.vel_command_w[:, 0], self.vel_command_w[:, 1]
    world = self.is_world_env
    vel_b[:, 0] = torch.where(world, cos_h * vx_w + sin_h * vy_w, vel_b[:, 0])
    vel_b[:, 1] = torch.where(world, -sin_h * vx_w + cos_h * vy_w, vel_b[:, 1])
    standing = self.is_standing_env.unsqueeze(1)
    vel_b.copy_(torch.where(standing, torch.zeros_like(vel_b), vel_b))
    self.vel_command_w.copy_(torch.where(standing, torch.zeros_like(self.vel_command_w), self.vel_command_w))


def _velocity_resample_command(self: Any, env_ids: torch.Tensor) -> None:
    """UniformVelocityCommand._resample_command: the same draws, in the same order and sizes, as mjlab's;
    the forward-only envs among `env_ids` are clamped by a mask instead of a second index list."""
    cfg = self.cfg
    r = torch.empty(len(env_ids), device=self.device)
    self.vel_command_b[env_ids, 0] = r.uniform_(*cfg.ranges.lin_vel_x)
    self.vel_command_b[env_ids, 1] = r.uniform_(*cfg.ranges.lin_vel_y)
    self.vel_command_b[env_ids, 2] = r.uniform_(*cfg.ranges.ang_vel_z)
    if cfg.heading_command:
        assert cfg.ranges.heading is not None
        self.heading_target[env_ids] = r.uniform_(*cfg.ranges.heading)
        self.is_heading_env[env_ids] = r.uniform_(0.0, 1.0) <= cfg.rel_heading_envs
    self.is_standing_env[env_ids] = r.uniform_(0.0, 1.0) <= cfg.rel_standing_envs
    self.is_world_env[env_ids] = r.uniform_(0.0, 1.0) <= cfg.rel_world_envs
    self.vel_command_w[env_ids] = self.vel_command_b[env_ids]
    self.is_forward_env[env_ids] = r.uniform_(0.0, 1.0) <= cfg.rel_forward_envs
    forward = self.is_forward_env[env_ids]
    rows = self.vel_command_b[env_ids]
    clamped = torch.stack([rows[:, 0].abs().clamp(min=0.3), torch.zeros_like(rows[:, 1]),
                           torch.zeros_like(rows[:, 2])], dim=1)
    self.vel_command_b[env_ids] = torch.where(forward.unsqueeze(1), clamped, rows)


def _raycast_extract_yaw_rotation(self: Any, rot_mat: torch.Tensor) -> torch.Tensor:
    """RayCastSensor._extract_yaw_rotation with the Y-axis fallback selected by a mask (mjlab 1.6)."""
    batch_size = rot_mat.shape[0]
    x_proj = rot_mat[:, :, 0].clone()
    x_proj[:, 2] = 0
    x_norm = x_proj.norm(dim=1)
    singular = x_norm < 0.1
    y_proj = rot_mat[:, :, 1].clone()
    y_proj[:, 2] = 0
    y_norm = y_proj.norm(dim=1).clamp(min=1e-6)
    y_proj = y_proj / y_norm.unsqueeze(-1)
    x_from_y = torch.zeros_like(y_proj)
    x_from_y[:, 0] = y_proj[:, 1]
    x_from_y[:, 1] = -y_proj[:, 0]
    x_proj = torch.where(singular.unsqueeze(-1), x_from_y, x_proj)
    x_norm = torch.where(singular, torch.ones_like(x_norm), x_norm)
    x_norm = x_norm.clamp(min=1e-6)
    x_proj = x_proj / x_norm.unsqueeze(-1)
    yaw_mat = torch.zeros((batch_size, 3, 3), device=rot_mat.device, dtype=rot_mat.dtype)
    yaw_mat[:, 0, 0] = x_proj[:, 0]
    yaw_mat[:, 1, 0] = x_proj[:, 1]
    yaw_mat[:, 0, 1] = -x_proj[:, 1]
    yaw_mat[:, 1, 1] = x_proj[:, 0]
    yaw_mat[:, 2, 2] = 1
    return yaw_mat


def velocity_command_supported(term: Any) -> bool:
    """A UniformVelocityCommand (mjlab's class, not a subclass) without the viewer's joystick."""
    from mjlab.tasks.velocity.mdp.velocity_command import UniformVelocityCommand

    return type(term) is UniformVelocityCommand and getattr(term, "_joystick_enabled", None) is None


def install(env: Any) -> list[str]:
    """Bind the versions above on `env`'s command terms and ray-cast sensors; the names of what was bound."""
    from mjlab.sensor.raycast_sensor import RayCastSensor

    bound: list[str] = []
    terms = getattr(env.command_manager, "_terms", {}) or {}
    for name, term in terms.items():
        if velocity_command_supported(term):
            term._update_command = types.MethodType(_velocity_update_command, term)
            term._resample_command = types.MethodType(_velocity_resample_command, term)
            bound.append(f"command {name}: _update_command, _resample_command")
    for name, sensor in env.scene.sensors.items():
        if isinstance(sensor, RayCastSensor) and type(sensor)._extract_yaw_rotation is RayCastSensor._extract_yaw_rotation:
            sensor._extract_yaw_rotation = types.MethodType(_raycast_extract_yaw_rotation, sensor)
            bound.append(f"sensor {name}: _extract_yaw_rotation")
    return bound


def reset_events(env: Any, env_ids: torch.Tensor, step_count: torch.Tensor) -> None:
    """EventManager.apply(mode="reset", env_ids, global_env_step_count) for terms that fire on every reset
    (min_step_count_between_reset == 0, checked by the staged step): the count comes from `step_count`, a
    device scalar the caller fills each tick (a captured graph would keep a Python int as it was)."""
    from mjlab.managers.event_manager import RecomputeLevel

    em = env.event_manager
    strongest = RecomputeLevel.none
    for index, term_cfg in enumerate(em._mode_term_cfgs["reset"]):
        em._reset_term_last_triggered_step_id[index][env_ids] = step_count.to(
            em._reset_term_last_triggered_step_id[index].dtype)
        em._reset_term_last_triggered_once[index][env_ids] = True
        term_cfg.func(env, env_ids, **term_cfg.params)
        strongest = max(strongest, getattr(term_cfg.func, "recompute", RecomputeLevel.none))
    if strongest != RecomputeLevel.none:
        env.sim.recompute_constants(strongest)


def command_reset(env: Any, env_ids: torch.Tensor) -> dict[str, Any]:
    """CommandManager.reset over CommandTerm.reset (the velocity command adds nothing without
    init_velocity_prob, checked): each metric's mean over the reset envs as a tensor."""
    extras: dict[str, Any] = {}
    for name, term in env.command_manager._terms.items():
        for metric_name, metric_value in term.metrics.items():
            extras[f"Metrics/{name}/{metric_name}"] = torch.mean(metric_value[env_ids])
            metric_value[env_ids] = 0.0
        term.command_counter[env_ids] = 0
        term._resample(env_ids)
    return extras


def termination_reset(env: Any, env_ids: torch.Tensor) -> dict[str, Any]:
    """TerminationManager.reset: each term's count over the reset envs as a tensor."""
    tm = env.termination_manager
    extras: dict[str, Any] = {"Episode_Termination/" + key: torch.count_nonzero(done[env_ids])
                              for key, done in tm._term_dones.items()}
    for term_cfg in tm._class_term_cfgs:
        term_cfg.func.reset(env_ids=env_ids)
    return extras
