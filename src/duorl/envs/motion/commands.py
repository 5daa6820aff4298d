"""`duorl motion import` and `duorl motion inspect`: exit codes 0 (done), 2 (refused input)."""

from __future__ import annotations

import sys
from typing import Any, Optional

import numpy as np

from duorl.envs.motion.checks import Report
from duorl.envs.motion.findings import MotionFileError


def _load(src: str, fmt: Optional[str], fps: Optional[float], robot_xml: Optional[str],
          action_range: Optional[str] = None) -> Any:
    """(report, clip, kinematics), or an exit code after printing why not."""
    from duorl.config.errors import ConfigError
    from duorl.envs.g1 import model as g1
    from duorl.envs.motion.load import inspect_motion

    try:
        return inspect_motion(src, g1.load(robot_xml), fmt, fps, action_range)
    except (ConfigError, MotionFileError) as e:  # no G1 model, or a file that cannot be read
        print(f"error: {e}", file=sys.stderr)
        return 2


def _print_findings(rep: Report) -> None:
    for f in rep.findings:
        print(f"{f.level}: {f.message(rep.source.path)}", file=sys.stderr)


def import_command(src: str, out: str, fmt: Optional[str] = None, fps: Optional[float] = None,
                   out_fps: Optional[float] = None, robot_xml: Optional[str] = None) -> int:
    """Write SRC (any supported format) as a canonical clip: joints in model order, body arrays by
    forward kinematics on duorl's G1, velocities by finite differences, optionally resampled."""
    from duorl.envs.motion.checks import clip_at
    from duorl.envs.motion.clip import save_clip

    if out_fps is not None and not (np.isfinite(out_fps) and out_fps > 0):
        print(f"error: --out-fps must be a number > 0 (got {out_fps})", file=sys.stderr)
        return 2
    loaded = _load(src, fmt, fps, robot_xml)
    if isinstance(loaded, int):
        return loaded
    rep, clip, kin = loaded
    _print_findings(rep)
    if rep.errors or clip is None:
        print(f"error: {src}: not imported ({len(rep.errors)} errors above)", file=sys.stderr)
        return 2
    if out_fps is not None and rep.trajectory is not None:
        clip = clip_at(kin, rep.trajectory, out_fps)
    save_clip(out, clip)
    print(f"wrote {out}: {clip.num_frames} frames at {clip.fps:g} fps ({clip.duration:.2f} s) from the "
          f"{rep.source.format} file {src}; {len(rep.warnings)} warnings")
    return 0


def _joint_table(rep: Report, names: tuple[str, ...]) -> list[str]:
    s = rep.stats
    lo, hi = s["joint_range"][:, 0], s["joint_range"][:, 1]
    rows = ["joints (rad)                    min      max   limit lo  limit hi"]
    for j, n in enumerate(names):
        qmin, qmax = float(s["joint_min"][j]), float(s["joint_max"][j])
        flag = ""
        if qmin < lo[j] - 1e-3 or qmax > hi[j] + 1e-3:
            flag = "  BEYOND LIMIT"
        elif qmin < lo[j] + 0.05 * (hi[j] - lo[j]) or qmax > hi[j] - 0.05 * (hi[j] - lo[j]):
            flag = "  near limit (outer 5%)"
        rows.append(f"  {n:<26} {qmin:8.3f} {qmax:8.3f} {lo[j]:9.3f} {hi[j]:9.3f}{flag}")
    return rows


def _summary(rep: Report, names: tuple[str, ...]) -> list[str]:
    s = rep.stats
    src = rep.source
    lines = [f"{src.path}: {src.format} format, {s['frames']} frames at {s['fps']:g} fps ({s['fps_field']})"
             + (f", {s['duration_s']:.2f} s" if "duration_s" in s else "")]
    if "joint_min" in s:
        lines += _joint_table(rep, names)
    if "lowest_point_m" in s:
        low, foot = s["lowest_point_m"], s["foot_height_m"]
        lines.append(f"floor: lowest point min {low.min() * 100:.1f} cm, median {np.median(low) * 100:.1f} cm; "
                     f"foot height min {foot.min() * 100:.1f} / median {np.median(foot) * 100:.1f} / max {foot.max() * 100:.1f} cm")
        if s.get("hand_height_m") is not None:
            lines.append(f"       hands lowest {s['hand_height_m'].min() * 100:.1f} cm")
    consistency = []
    if "body_pos_error_m" in s:
        consistency.append(f"stored bodies vs forward kinematics: position mean {s['body_pos_error_m']['mean'] * 100:.2f} cm, "
                           f"max {s['body_pos_error_m']['max'] * 100:.2f} cm; orientation max {s['body_ori_error_rad']['max']:.3g} rad")
    if "joint_vel_error_rad_s" in s:
        fit = f" (the stored rates fit {s['joint_vel_fps_fit']:.4g} fps)" if s.get("joint_vel_fps_fit") else ""
        consistency.append(f"stored joint_vel vs finite differences: mean {s['joint_vel_error_rad_s']:.3g} rad/s{fit}")
    if "root_ang_vel_error_rad_s" in s:
        consistency.append(f"stored root angular velocity vs finite differences: mean {s['root_ang_vel_error_rad_s']:.3g} rad/s")
    if "body_vel_error" in s:
        consistency.append(f"stored body velocities vs finite differences: {s['body_vel_error']['lin_m_s']:.3g} m/s, "
                           f"{s['body_vel_error']['ang_rad_s']:.3g} rad/s (mean)")
    if "joint_speed_p99_rad_s" in s:
        consistency.append(f"speeds (99th percentile): joints {s['joint_speed_p99_rad_s']:.3g} rad/s, root "
                           f"{s['root_speed_p99_m_s']:.3g} m/s")
    if consistency:
        lines.append("consistency (duorl recomputes bodies and velocities from the root pose and joints):")
        lines += [f"  {c}" for c in consistency]
    for name, r in s.get("reach", {}).items():
        lines.append(f"task.action_range={name}: max |action| {r['max_abs_action']:.2f} ({r['joint']}), "
                     f"{r['frames_beyond'] * 100:.0f}% of frames beyond reach")
    verdict = "not usable" if rep.errors else "usable"
    lines.append(f"verdict: {verdict} ({len(rep.errors)} errors, {len(rep.warnings)} warnings)")
    return lines


def inspect_command(src: str, fmt: Optional[str] = None, fps: Optional[float] = None, plot: Optional[str] = None,
                    robot_xml: Optional[str] = None, action_range: str = "joint_limits") -> int:
    loaded = _load(src, fmt, fps, robot_xml, action_range)
    if isinstance(loaded, int):
        return loaded
    rep, _, kin = loaded
    print("\n".join(_summary(rep, kin.joint_names)))
    _print_findings(rep)
    if plot:
        if rep.trajectory is None or "lowest_point_m" not in rep.stats:
            print("error: no plot: the clip failed a check that comes before its kinematics", file=sys.stderr)
            return 2
        from duorl.envs.motion.plot import plot_clip

        plot_clip(rep, kin.joint_names, plot)
        print(f"plot: {plot}")
    return 2 if rep.errors else 0
