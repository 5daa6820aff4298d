"""A clip file in any supported format -> checked, canonical clip on duorl's G1 model.

read (motion/formats.py) -> check (motion/checks.py) -> resample the state trajectory -> forward
kinematics and finite differences (motion/fk.py). `check_motion_file` is the training entry's early
check: it runs in the parent, before any run directory, process or simulation exists.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import mujoco

from duorl.envs.motion.checks import CONTROL_FPS, ClipChecker, Report, clip_at
from duorl.envs.motion.clip import MotionClip
from duorl.envs.motion.findings import MotionFileError
from duorl.envs.motion.fk import ClipKinematics
from duorl.envs.motion.formats import FORMATS, read_motion

ALLOWED = f"a G1 clip: {', '.join(FORMATS)} layout (docs/motion.md)"


def inspect_motion(path: str | Path, model: mujoco.MjModel, fmt: Optional[str] = None, fps: Optional[float] = None,
                   action_range: Optional[str] = None) -> tuple[Report, Optional[MotionClip], ClipKinematics]:
    """Read and check a clip (errors are in the report, not raised, except for an unreadable file)."""
    kin = ClipKinematics(model)
    src = read_motion(path, kin.joint_names, kin.body_names, fmt, fps)
    rep, clip = ClipChecker(kin, action_range).check(src)
    return rep, clip, kin


def load_motion(path: str | Path, model: mujoco.MjModel, target_fps: Optional[float] = None, fmt: Optional[str] = None,
                fps: Optional[float] = None, action_range: Optional[str] = None) -> tuple[MotionClip, Report]:
    """The canonical clip (at target_fps, default the file's rate) and its report; raises
    MotionFileError when the report has an error."""
    rep, clip, kin = inspect_motion(path, model, fmt, fps, action_range)
    if rep.errors or clip is None:
        raise MotionFileError(rep.source.path, rep.findings)
    assert rep.trajectory is not None
    if target_fps is not None and abs(target_fps - clip.fps) > 1e-9:
        clip = clip_at(kin, rep.trajectory, target_fps)
    return clip.validate(rep.source.path), rep


def config_error(e: MotionFileError, path: Any) -> Exception:
    """The ConfigError of task.motion_file for a clip that cannot be used."""
    from duorl.config.errors import ConfigError

    first = e.errors[0] if e.errors else e.findings[0]
    more = f" ({len(e.errors) - 1} more errors: duorl motion inspect {path})" if len(e.errors) > 1 else ""
    problem = f"{first.field}: {first.problem}" + (f"; likely cause: {first.cause}" if first.cause else "") + more
    return ConfigError("task.motion_file", path, problem, ALLOWED,
                       first.fix or f"see `duorl motion inspect {path}` and docs/motion.md")


def check_motion_file(task_cfg: Any) -> list[str]:
    """The tracking task's first check (envs/tasks/builtin.py): task.motion_file's clip, the warnings to
    show (one line each); raises ConfigError (key task.motion_file) when the clip cannot be used. The
    synthetic clip (motion_file null) has nothing to check."""
    if task_cfg.motion_file is None:
        return []
    from duorl.envs.g1 import model as g1

    model = g1.load(task_cfg.robot_xml)  # a missing model raises its own ConfigError
    path = str(Path(task_cfg.motion_file).expanduser())
    try:
        _, rep = load_motion(path, model, CONTROL_FPS, action_range=task_cfg.action_range)
    except MotionFileError as e:
        raise config_error(e, task_cfg.motion_file) from None
    return [f.message(path) for f in rep.warnings]
