"""The clip of an mjlab tracking task (`task.motion_file`), checked as mjlab's motion loader will read it,
before anything is built.

mjlab's `MotionLoader` (mjlab/tasks/tracking/mdp/commands.py) `np.load`s the file and reads six arrays,
each cast to float32: joint_pos and joint_vel [T, J] in the robot's joint order, body_pos_w,
body_quat_w (w, x, y, z), body_lin_vel_w and body_ang_vel_w [T, B, .] for every body of the robot (it
indexes them by the robot's body indices). It reads no frame rate: the motion command steps one frame
per control step. So a clip must be:
  - `check_file` (no mjlab needed): an existing, readable .npz with those six arrays, real and finite,
    of consistent shapes and at least 2 frames; its stored joint rates not explained by another frame
    rate than its stated `fps` (as duorl's own clips: envs/motion/checks.py);
  - `check_robot` (mjlab's configuration, no env): J and B the robot's joint and body counts (and their
    names where the file names them, as duorl's clips do), and a frame rate equal to the task's control
    rate (a stated fps, and the rate the stored joint rates fit).
Each problem is a ConfigError of task.motion_file: one line naming the array, the file and the fix.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from duorl.config.errors import ConfigError

KEY = "task.motion_file"
# what mjlab 1.6's MotionLoader reads, and the trailing shape of each (T frames, J joints, B bodies)
LOADER_ARRAYS: dict[str, tuple[str, ...]] = {
    "joint_pos": ("J",), "joint_vel": ("J",), "body_pos_w": ("B", "3"), "body_quat_w": ("B", "4"),
    "body_lin_vel_w": ("B", "3"), "body_ang_vel_w": ("B", "3"),
}
FPS_MATCH = 0.01  # relative: a stated fps this close to the control rate is the control rate


def make_clip(task: str, control_fps: float | str = "the task's control rate") -> str:
    """How to make a clip for `task` (the fix of a missing or unusable clip)."""
    rate = f"{control_fps:g}" if isinstance(control_fps, float) else "50"
    return (f"write one with `duorl motion import SRC.npz CLIP.npz --out-fps {rate}` from any clip duorl reads "
            f"(docs/motion.md; `duorl motion synth SRC.npz` makes a synthetic one), then --task {task} "
            "task.motion_file=CLIP.npz")


@dataclass(frozen=True)
class MjlabClip:
    """What check_file read: the arrays mjlab reads, and the optional fps, joint_names and body_names."""

    path: str
    arrays: dict[str, np.ndarray]
    fps: Optional[float]
    joint_names: Optional[tuple[str, ...]]
    body_names: Optional[tuple[str, ...]]

    @property
    def frames(self) -> int:
        return int(self.arrays["joint_pos"].shape[0])

    @property
    def joints(self) -> int:
        return int(self.arrays["joint_pos"].shape[1])

    @property
    def bodies(self) -> int:
        return int(self.arrays["body_pos_w"].shape[1])


def _refuse(value: Any, path: str, field: str, problem: str, fix: str) -> ConfigError:
    return ConfigError(KEY, value, f"{path}: {field}: {problem}", "an .npz clip in mjlab's motion format "
                       f"({', '.join(LOADER_ARRAYS)}; docs/tasks.md)", fix)


def check_file(value: str, task: str) -> MjlabClip:
    """The file of task.motion_file=`value` as mjlab's loader reads it, without mjlab; ConfigError otherwise."""
    path = str(Path(value).expanduser())
    if not Path(path).is_file():
        what = "is a directory" if Path(path).is_dir() else "does not exist"
        raise _refuse(value, path, "file", what, make_clip(task))
    try:
        with np.load(path, allow_pickle=False) as data:
            files = list(data.files)
            missing = [k for k in LOADER_ARRAYS if k not in files]
            if missing:
                raise _refuse(value, path, ", ".join(missing), f"missing (mjlab's motion loader reads "
                              f"{', '.join(LOADER_ARRAYS)}; the file has {', '.join(sorted(files)) or 'no arrays'})",
                              make_clip(task))
            arrays = {k: np.asarray(data[k]) for k in LOADER_ARRAYS}
            fps = np.asarray(data["fps"]) if "fps" in files else None
            names = {k: tuple(str(n) for n in np.asarray(data[k]).reshape(-1)) if k in files else None
                     for k in ("joint_names", "body_names")}
    except ConfigError:
        raise
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as e:
        raise _refuse(value, path, "file", f"not readable as an .npz ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})",
                      make_clip(task)) from None
    for k, a in arrays.items():
        if a.dtype.kind not in "fiu":
            raise _refuse(value, path, k, f"holds {a.dtype} values, not real numbers", make_clip(task))
    frames = arrays["joint_pos"].shape[0] if arrays["joint_pos"].ndim == 2 else -1
    dims: dict[str, int] = {}
    for k, trailing in LOADER_ARRAYS.items():
        a, want = arrays[k], ("T", *trailing)
        ok = a.ndim == len(want) and a.shape[0] == frames
        for n, (size, w) in enumerate(zip(a.shape[1:], trailing), start=1):
            if w.isdigit():
                ok = ok and size == int(w)
            else:
                ok = ok and dims.setdefault(w, size) == size
        if not ok:
            expected = "[" + ", ".join(str(dims.get(w, w)) if not w.isdigit() else w for w in ("T" if frames < 0 else str(frames), *trailing)) + "]"
            raise _refuse(value, path, k, f"shape {list(a.shape)}, expected {expected} (T frames, J joints, B bodies)",
                          make_clip(task))
    if frames < 2:
        raise _refuse(value, path, "joint_pos", f"{frames} frame(s); a clip needs at least 2", make_clip(task))
    for k, a in arrays.items():
        bad = ~np.isfinite(a.astype(np.float64))
        if bad.any():
            first = int(np.argwhere(bad.reshape(a.shape[0], -1).any(axis=1))[0][0])
            raise _refuse(value, path, k, f"{int(bad.sum())} values not finite (NaN or inf), the first at frame {first}",
                          "re-export the clip; `duorl motion inspect` shows where")
    stated = None
    if fps is not None:
        flat = fps.reshape(-1)
        if flat.size != 1 or flat.dtype.kind not in "fiu" or not np.isfinite(flat[0]) or not flat[0] > 0:
            raise _refuse(value, path, "fps", f"{fps.tolist()!r}, expected one finite number > 0", make_clip(task))
        stated = float(flat[0])
    clip = MjlabClip(path, arrays, stated, names["joint_names"], names["body_names"])
    if stated is not None:
        _check_rate(clip, value, stated, f"the stated fps={stated:g}", task)
    return clip


def _rate_fit(clip: MjlabClip, fps: float) -> Optional[float]:
    """The frame rate the stored joint rates fit, where another rate than `fps` explains them (the test of
    duorl's own clips, envs/motion/checks.ClipChecker._wrong_rate); None where `fps` does."""
    from duorl.envs.motion.checks import ClipChecker

    q = clip.arrays["joint_pos"].astype(np.float64)
    g = clip.arrays["joint_vel"].astype(np.float64)
    d = np.gradient(q, 1.0 / fps, axis=0, edge_order=2 if clip.frames >= 3 else 1)
    gd, dd = float((g * d).sum()), float((d * d).sum())
    if np.abs(d).max() <= 1e-3 or gd <= 0:
        return None  # no motion, or rates that fit no factor: nothing says another rate
    k = gd / dd
    fit = gd / max(float(np.sqrt((g * g).sum() * dd)), 1e-12)
    return fps * k if ClipChecker._wrong_rate(k, fit) else None


def _check_rate(clip: MjlabClip, value: str, fps: float, said: str, task: str) -> None:
    fits = _rate_fit(clip, fps)
    if fits is not None:
        raise _refuse(value, clip.path, "joint_vel", f"the stored joint rates fit {fits:.4g} fps, not {said} (a clip "
                      "sped up or slowed down without its rates, or a wrong fps)",
                      f"re-import it at its real rate: duorl motion import SRC CLIP.npz --fps {fits:.4g} --out-fps "
                      f"{fps:g}")


def check_robot(clip: MjlabClip, value: str, task: str, joint_names: Sequence[str], body_names: Sequence[str],
                control_fps: float) -> None:
    """The clip against the task's robot and control rate (mjlab's configuration); ConfigError otherwise."""
    fix = make_clip(task, control_fps)
    if clip.joints != len(joint_names):
        raise _refuse(value, clip.path, "joint_pos", f"{clip.joints} joints, the task's robot has {len(joint_names)}",
                      f"a clip of this robot: {fix}")
    if clip.joint_names is not None and tuple(clip.joint_names) != tuple(joint_names):
        wrong = next(i for i, (a, b) in enumerate(zip(clip.joint_names, joint_names)) if a != b)
        raise _refuse(value, clip.path, "joint_names", f"column {wrong} is {clip.joint_names[wrong]}, the robot's joint "
                      f"{wrong} is {joint_names[wrong]} (mjlab reads the columns in the robot's joint order)", fix)
    if clip.bodies != len(body_names):
        raise _refuse(value, clip.path, "body_pos_w", f"{clip.bodies} bodies, the task's robot has {len(body_names)} "
                      "(mjlab indexes the body arrays by the robot's body indices)", f"a clip of this robot: {fix}")
    if clip.body_names is not None and tuple(clip.body_names) != tuple(body_names):
        wrong = next(i for i, (a, b) in enumerate(zip(clip.body_names, body_names)) if a != b)
        raise _refuse(value, clip.path, "body_names", f"column {wrong} is {clip.body_names[wrong]}, the robot's body "
                      f"{wrong} is {body_names[wrong]}", fix)
    if clip.fps is not None and abs(clip.fps - control_fps) > FPS_MATCH * control_fps:
        raise _refuse(value, clip.path, "fps", f"{clip.fps:g}, but mjlab plays one frame per control step of {task} "
                      f"({control_fps:g} Hz): the motion would run {control_fps / clip.fps:.3g}x its speed",
                      f"resample it: duorl motion import {clip.path} CLIP.npz --out-fps {control_fps:g}")
    _check_rate(clip, value, control_fps, f"the {control_fps:g} Hz control rate mjlab plays it at", task)


def robot_facts(cfg: Any) -> tuple[tuple[str, ...], tuple[str, ...], float]:
    """(joint names, body names, control rate in Hz) of the robot an mjlab env configuration's motion
    command tracks: its entity built alone (a model, no simulation: milliseconds)."""
    command = next(c for c in cfg.commands.values() if hasattr(c, "motion_file"))
    entity = cfg.scene.entities[command.entity_name].build()
    return tuple(entity.joint_names), tuple(entity.body_names), 1.0 / (cfg.sim.mujoco.timestep * cfg.decimation)


def check_task_clip(task: str, task_cfg: Any, env_cfg: Any) -> None:
    """task.motion_file's clip against the task `task` whose mjlab env configuration is `env_cfg` (its robot
    and control rate); ConfigError otherwise."""
    clip = check_file(task_cfg.motion_file, task)
    joints, bodies, control_fps = robot_facts(env_cfg)
    check_robot(clip, task_cfg.motion_file, task, joints, bodies, control_fps)
