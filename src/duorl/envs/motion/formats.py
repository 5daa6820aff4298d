"""Reading the published G1 clip formats into one SourceMotion (as stored; motion/checks.py judges it).

  canonical  .npz  fps, joint_pos [T, J], body_pos_w / body_quat_w [T, B, .] (w, x, y, z), and
                   usually joint_vel and body_lin_vel_w / body_ang_vel_w (world frame); optional
                   body_names, joint_names. The root pose is the pelvis body's (body_names, else
                   column 0). BeyondMimic / whole_body_tracking, mjlab's csv_to_npz and duorl write it.
  holosoma   .npz  fps, joint_pos [T, 7 + J] = root position, root quaternion (w, x, y, z), joints;
                   joint_vel [T, 6 + J] = root linear and angular velocity (both world frame),
                   joint rates; joint_names [J]; body arrays as canonical with body_names [B]
                   (holosoma's own model's bodies, 'world' first).
  csv        .csv  one frame a row: root position (3), root quaternion (x, y, z, w), J joint angles
                   (mjlab's converter input and the LAFAN1 G1 retargets); no frame rate in the file
                   (30 fps, theirs, unless --fps says otherwise); an optional header row naming
                   the columns (joints matched by the names of the last J).
Joints are matched to the model by name wherever the file names them ("_joint" suffix optional),
else taken in the model's order (checks.py recognises Isaac Lab's order in unnamed canonical files).
Bodies are compared by name; 'world' and bodies the model lacks are ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from duorl.envs.motion.findings import Finding, MotionFileError, error, warning

FORMATS = ("canonical", "holosoma", "csv")
CSV_DEFAULT_FPS = 30.0
ROOT_BODY = "pelvis"


@dataclass
class StoredBodies:
    """A file's body arrays for the model bodies it names (or holds in model order)."""

    names: tuple[str, ...]  # model body names, one per column below
    pos: np.ndarray  # [T, B, 3]
    quat: np.ndarray  # [T, B, 4]
    lin_vel: Optional[np.ndarray] = None
    ang_vel: Optional[np.ndarray] = None
    order_assumed: bool = False  # no body_names: model order assumed


@dataclass
class SourceMotion:
    path: str
    format: str
    fps: float
    fps_field: str  # where the frame rate came from ("fps", "--fps", "assumed")
    root_pos: np.ndarray  # [T, 3] as stored (units unchecked)
    root_quat: np.ndarray  # [T, 4] reordered to (w, x, y, z) by the format's convention
    root_quat_field: str
    quat_order: str  # the format's order in the file: "wxyz" or "xyzw"
    joint_pos: np.ndarray  # [T, J] in the model's joint order
    joint_field: str
    joint_names_given: bool
    joint_vel: Optional[np.ndarray] = None  # stored rates, model order
    root_lin_vel: Optional[np.ndarray] = None  # stored, world frame
    root_ang_vel_w: Optional[np.ndarray] = None  # stored, world frame by the format's convention
    root_vel_field: str = ""
    bodies: Optional[StoredBodies] = None
    findings: list[Finding] = field(default_factory=list)  # what reading noticed (warnings)

    @property
    def num_frames(self) -> int:
        return int(self.joint_pos.shape[0])


def detect_format(path: Path, keys: Sequence[str] = (), joint_pos_cols: int = -1, num_joint_names: int = -1,
                  num_joints: int = 29) -> str:
    if path.suffix.lower() in (".csv", ".txt"):
        return "csv"
    if "joint_pos" in keys and "body_pos_w" not in keys and "root_pos" not in keys:
        return "canonical"  # lacks the root: canonical's reader names what is missing
    joints = num_joint_names if num_joint_names > 0 else num_joints
    return "holosoma" if joint_pos_cols == joints + 7 else "canonical"


def _strip(name: str) -> str:
    return name[: -len("_joint")] if name.endswith("_joint") else name


def match_joints(file_names: Sequence[str], model_names: Sequence[str], field_name: str) -> tuple[np.ndarray, list[Finding]]:
    """The file column of each model joint, and warnings about columns the model lacks."""
    stripped = [_strip(str(n)) for n in file_names]
    dupes = sorted({n for n in stripped if stripped.count(n) > 1})
    if dupes:
        raise MotionFileError("", [error(field_name, f"names {dupes} appear more than once", "a broken export",
                                         "write each joint name once")])
    missing = [m for m in model_names if _strip(m) not in stripped]
    unknown = [str(n) for n, s in zip(file_names, stripped) if s not in {_strip(m) for m in model_names}]
    if missing:
        raise MotionFileError("", [error(
            field_name, f"lacks the model joints {missing} (the file names {len(file_names)} joints, "
            f"{len(unknown)} of them unknown to the G1 model: {unknown[:6]})",
            "a clip of another robot (or G1 variant, e.g. 23 DoF) or other joint names",
            "retarget to the 29-DoF G1 (names as in the model, e.g. left_hip_pitch_joint)")])
    notes = [warning(field_name, f"joints {unknown} are not in the G1 model and are ignored")] if unknown else []
    return np.array([stripped.index(_strip(m)) for m in model_names]), notes


def _names(data: dict, key: str) -> Optional[list[str]]:
    return [str(n) for n in np.asarray(data[key]).reshape(-1)] if key in data else None


def _need(data: dict, keys: Sequence[str], fmt: str) -> None:
    missing = [k for k in keys if k not in data]
    if missing:
        raise MotionFileError("", [error(
            ",".join(missing), f"missing for the {fmt} format (the file has {sorted(data)})",
            "another format, or a file that is not a motion clip",
            f"pass --format (one of {', '.join(FORMATS)}) or convert the file (docs/motion.md)")])


_KINDS = {"U": "text", "S": "bytes", "c": "complex numbers", "O": "Python objects", "b": "booleans",
          "M": "dates", "m": "time spans", "V": "raw records"}


def _real(key: str, raw: object, fix: str = "") -> np.ndarray:
    """`raw` as float64; refused unless it holds real numbers (ints or floats)."""
    a = np.asarray(raw)
    if a.dtype.kind not in "iuf":
        shown = f" ({a.reshape(-1)[0].item()!r}...)" if a.size and a.dtype.kind in "USc" else ""
        cause = {"U": "a tool that wrote its numbers as text", "S": "a tool that wrote its numbers as text",
                 "c": "complex arithmetic upstream (a transform whose imaginary part was never dropped)"}
        raise MotionFileError("", [error(key, f"holds {_KINDS.get(a.dtype.kind, str(a.dtype))} (dtype {a.dtype}){shown}, "
                                         "expected real numbers", cause.get(a.dtype.kind, "a broken export"),
                                         fix or f"write {key} as a float array")])
    return a.astype(np.float64)


def check_finite(key: str, a: np.ndarray, where: str = "frame") -> None:
    """Every value of `a` (frames first) is finite; else an error naming the array, how many values
    and frames, and the first frame (a NaN anywhere would silently turn later comparisons off)."""
    bad = ~np.isfinite(a)
    if not bad.any():
        return
    frames = np.flatnonzero(bad.reshape(len(a), -1).any(axis=1))
    raise MotionFileError("", [error(key, f"{int(bad.sum())} non-finite value(s) (nan or inf) in {len(frames)} "
                                          f"{where}(s), the first at {where} {int(frames[0])}",
                                     "a broken export (a failed retarget, a gap in the capture)",
                                     "re-export the clip, or cut the frames that hold them")])


def _array(data: dict, key: str, ndim: int, last: Optional[int] = None, frames: Optional[int] = None) -> np.ndarray:
    a = _real(key, data[key])
    shape = "[T" + ", ." * (ndim - 2) + (f", {last}]" if last is not None else ", .]")
    if a.ndim != ndim or (last is not None and a.shape[-1] != last) or (frames is not None and a.shape[0] != frames):
        want = shape.replace("T", str(frames)) if frames is not None else shape
        raise MotionFileError("", [error(key, f"has shape {a.shape}, expected {want}",
                                         "a truncated or differently laid out file")])
    check_finite(key, a)
    return a


def _fps(data: dict, override: Optional[float]) -> tuple[float, str]:
    if override is not None:
        return float(override), "--fps"
    _need(data, ("fps",), "npz")
    v = _real("fps", data["fps"], "write fps as a number, or give the rate: duorl motion import SRC OUT.npz --fps N").reshape(-1)
    if v.size != 1:
        raise MotionFileError("", [error("fps", f"has {v.size} values, expected one number")])
    return float(v[0]), "fps"


def _stored_bodies(data: dict, model_bodies: Sequence[str], frames: int) -> tuple[Optional[StoredBodies], list[Finding]]:
    if "body_pos_w" not in data or "body_quat_w" not in data:
        return None, []
    pos = _array(data, "body_pos_w", 3, 3, frames)
    quat = _array(data, "body_quat_w", 3, 4, frames)
    if quat.shape[1] != pos.shape[1]:
        raise MotionFileError("", [error("body_quat_w", f"has {quat.shape[1]} bodies, body_pos_w {pos.shape[1]}")])
    vel = {k: _array(data, k, 3, 3, frames) if k in data else None for k in ("body_lin_vel_w", "body_ang_vel_w")}
    for k, v in vel.items():
        if v is not None and v.shape[1] != pos.shape[1]:
            raise MotionFileError("", [error(k, f"has {v.shape[1]} bodies, body_pos_w {pos.shape[1]}")])
    names = _names(data, "body_names")
    if names is None:
        if pos.shape[1] != len(model_bodies):
            raise MotionFileError("", [error(
                "body_pos_w", f"has {pos.shape[1]} bodies and there is no body_names; expected one per G1 model "
                f"body except the world ({len(model_bodies)}), in model order", "a clip of another model",
                "add body_names to the file")])
        cols, kept, assumed = list(range(len(model_bodies))), tuple(model_bodies), True
    else:
        if len(names) != pos.shape[1]:
            raise MotionFileError("", [error("body_names", f"{len(names)} names for {pos.shape[1]} bodies in body_pos_w")])
        cols = [names.index(b) for b in model_bodies if b in names]
        kept, assumed = tuple(b for b in model_bodies if b in names), False
    take = lambda a: None if a is None else a[:, cols]  # noqa: E731
    return StoredBodies(kept, pos[:, cols], quat[:, cols], take(vel["body_lin_vel_w"]), take(vel["body_ang_vel_w"]),
                        assumed), []


def _joints(data: dict, raw: np.ndarray, vel: Optional[np.ndarray], model_joints: Sequence[str],
            field_name: str) -> tuple[np.ndarray, Optional[np.ndarray], bool, list[Finding]]:
    names = _names(data, "joint_names")
    if names is None:
        if raw.shape[1] != len(model_joints):
            raise MotionFileError("", [error(
                field_name, f"has {raw.shape[1]} joint columns, the G1 model has {len(model_joints)}",
                "a clip of another robot or G1 variant (23 DoF, or with hand joints), or an extra column (a frame index)",
                "retarget to the 29-DoF G1, or add joint_names so joints are matched by name")])
        return raw, vel, False, []
    if len(names) != raw.shape[1]:
        raise MotionFileError("", [error("joint_names", f"{len(names)} names for {raw.shape[1]} joint columns of {field_name}")])
    idx, notes = match_joints(names, model_joints, "joint_names")
    return raw[:, idx], None if vel is None else vel[:, idx], True, notes


def read_npz(path: Path, fmt: Optional[str], fps: Optional[float], model_joints: Sequence[str],
             model_bodies: Sequence[str]) -> SourceMotion:
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
    except Exception as e:  # noqa: BLE001 - numpy raises many kinds for a file that is not an npz
        raise MotionFileError(str(path), [error("(file)", f"not a readable .npz ({type(e).__name__}: {e})")]) from e
    if "joint_pos" not in data:
        _need(data, ("joint_pos",), fmt or "any")
    jp = np.asarray(data["joint_pos"])
    names = _names(data, "joint_names")
    fmt = fmt or detect_format(path, list(data), jp.shape[1] if jp.ndim == 2 else -1,
                               len(names) if names else -1, len(model_joints))
    jp = _array(data, "joint_pos", 2)
    t = jp.shape[0]
    rate, rate_field = _fps(data, fps)
    bodies, notes = _stored_bodies(data, model_bodies, t)
    if fmt == "holosoma":
        _need(data, ("joint_vel",), fmt)
        jv = _array(data, "joint_vel", 2, None, t)
        if jv.shape[1] != jp.shape[1] - 1:
            raise MotionFileError("", [error("joint_vel", f"has {jv.shape[1]} columns, expected {jp.shape[1] - 1} (6 root + "
                                             f"{jp.shape[1] - 7} joints, holosoma's layout)")])
        joints, jvel, given, more = _joints(data, jp[:, 7:], jv[:, 6:], model_joints, "joint_pos[:, 7:]")
        return SourceMotion(str(path), fmt, rate, rate_field, jp[:, :3], jp[:, 3:7], "joint_pos[:, 3:7]", "wxyz",
                            joints, "joint_pos[:, 7:]", given, jvel, jv[:, :3], jv[:, 3:6], "joint_vel[:, 0:6]",
                            bodies, notes + more)
    if fmt != "canonical":
        raise MotionFileError(str(path), [error("--format", f"{fmt!r} is not a .npz format", fix="canonical or holosoma")])
    _need(data, ("body_pos_w", "body_quat_w"), fmt)
    assert bodies is not None
    if ROOT_BODY not in bodies.names:
        raise MotionFileError("", [error("body_names", f"has no {ROOT_BODY!r}: the root pose is that body's")])
    r = bodies.names.index(ROOT_BODY)
    jv = _array(data, "joint_vel", 2, jp.shape[1], t) if "joint_vel" in data else None
    joints, jvel, given, more = _joints(data, jp, jv, model_joints, "joint_pos")
    col = f"[:, {r}]" if bodies.order_assumed else f"[:, '{ROOT_BODY}']"
    return SourceMotion(str(path), fmt, rate, rate_field, bodies.pos[:, r], bodies.quat[:, r], f"body_quat_w{col}", "wxyz",
                        joints, "joint_pos", given, jvel,
                        None if bodies.lin_vel is None else bodies.lin_vel[:, r],
                        None if bodies.ang_vel is None else bodies.ang_vel[:, r], f"body_lin_vel_w/body_ang_vel_w{col}",
                        bodies, notes + more)


CSV_ROOT = ("x", "y", "z", "qx", "qy", "qz", "qw")  # the columns before the joints


def _check_root_columns(raw: np.ndarray, header: Optional[list[str]], model_joints: Sequence[str]) -> None:
    """A CSV whose first 7 columns are not the root pose: its header names joints there, or (no header)
    the rows hold exactly the model's joints. Either is an export of the joint angles alone, which
    would otherwise be refused for the wrong reason (too few joint columns: "another robot")."""
    known = {_strip(m) for m in model_joints}
    early = [h for h in (header or [])[: len(CSV_ROOT)] if _strip(h) in known]
    if early or (header is None and raw.shape[1] == len(model_joints)):
        found = (f"the header names joints in the first {len(CSV_ROOT)} columns ({', '.join(early[:3])}...)" if early
                 else f"the rows have {raw.shape[1]} columns, the G1's {len(model_joints)} joints alone")
        raise MotionFileError("", [error(
            "columns 1-7", f"{found}; a G1 .csv starts with the root pose: position x, y, z and quaternion "
            f"qx, qy, qz, qw ({len(CSV_ROOT) + len(model_joints)} columns in all)",
            "the root columns are missing (an export of the joint angles alone)",
            "write the root position and orientation before the joints (docs/motion.md)")])


def read_csv(path: Path, fps: Optional[float], model_joints: Sequence[str]) -> SourceMotion:
    try:
        lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
    except (OSError, UnicodeDecodeError) as e:
        raise MotionFileError(str(path), [error("(file)", f"not a readable text file ({e})")]) from e
    if not lines:
        raise MotionFileError(str(path), [error("(file)", "is empty")])
    sep = "," if "," in lines[0] else None
    header: Optional[list[str]] = None
    try:
        float(lines[0].split(sep)[0])
    except ValueError:
        header, lines = [c.strip() for c in lines[0].split(sep)], lines[1:]
    try:
        raw = np.array([[float(v) for v in ln.split(sep)] for ln in lines], dtype=np.float64)
    except ValueError as e:
        raise MotionFileError(str(path), [error("(rows)", f"a value is not a number ({e})")]) from e
    widths = {len(ln.split(sep)) for ln in lines}
    if raw.ndim != 2 or len(widths) != 1:
        raise MotionFileError(str(path), [error("(rows)", f"rows have different numbers of columns ({sorted(widths)})")])
    cols = raw.shape[1]
    if header is not None and len(header) != cols:
        raise MotionFileError(str(path), [error("(header)", f"names {len(header)} columns, the rows have {cols}",
                                                "a header of another file or a broken export")])
    _check_root_columns(raw, header, model_joints)
    check_finite("(rows)", raw)
    data = {"joint_names": np.array(header[7:])} if header is not None else {}
    joints, _, given, notes = _joints(data, raw[:, 7:], None, model_joints, f"columns 8-{cols}")
    if fps is None:
        notes = notes + [warning("fps", f"not stated by a .csv: {CSV_DEFAULT_FPS:g} fps assumed (the LAFAN1 retargets' "
                                 "and mjlab's converter default)", fix="state it: duorl motion import SRC OUT.npz --fps N")]
    return SourceMotion(str(path), "csv", float(fps) if fps is not None else CSV_DEFAULT_FPS,
                        "--fps" if fps is not None else "assumed", raw[:, :3], raw[:, [6, 3, 4, 5]],
                        "columns 4-7", "xyzw", joints, f"columns 8-{cols}", given, findings=notes)


def read_motion(path: str | Path, model_joints: Sequence[str], model_bodies: Sequence[str], fmt: Optional[str] = None,
                fps: Optional[float] = None) -> SourceMotion:
    """The file as stored, in the model's joint order; raises MotionFileError naming what is
    missing or malformed. fmt: one of FORMATS or None (detected); fps: overrides the file's."""
    p = Path(path).expanduser()
    if fmt is not None and fmt not in FORMATS:
        raise MotionFileError(str(p), [error("--format", f"{fmt!r} is not known", fix=f"one of {', '.join(FORMATS)}")])
    if not p.is_file():
        raise MotionFileError(str(p), [error("(file)", "no such file")])
    try:
        if fmt == "csv" or (fmt is None and detect_format(p) == "csv"):
            return read_csv(p, fps, model_joints)
        return read_npz(p, fmt, fps, model_joints, model_bodies)
    except MotionFileError as e:
        if e.source:
            raise
        raise MotionFileError(str(p), e.findings) from None
