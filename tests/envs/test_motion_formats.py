"""Clip formats and checks (issue 22): every layout loads and round-trips through `duorl motion import`
to the canonical arrays it was written from; each known mistake is caught with its message; train
refuses a bad clip before the run directory exists. Test clips are written here from the synthetic
clip (tests/envs/motion_files.py)."""

from __future__ import annotations

import numpy as np
import pytest

from duorl.cli import main as cli
from duorl.config.errors import ConfigError
from duorl.envs.task_sources import source_of, task_config
from duorl.envs.g1 import model as g1
from duorl.envs.motion.clip import ARRAYS, load_clip
from duorl.envs.motion.formats import read_motion
from duorl.envs.motion.load import check_motion_file, inspect_motion
from duorl.envs.motion.synth import synthesize

from duorl.envs.motion.fk import ClipKinematics

from .motion_files import canonical_arrays, lively_clip, write_canonical, write_csv, write_holosoma, write_isaac_lab

TRACK = "g1_motion_tracking"


@pytest.fixture(scope="module")
def model():
    return g1.load()


@pytest.fixture(scope="module")
def synthetic(model):
    return synthesize(model, seconds=2.0, fps=50.0)


@pytest.fixture(scope="module")
def arrays(synthetic):
    return canonical_arrays(synthetic)


@pytest.fixture(scope="module")
def lively(model, synthetic):
    return {0.0: canonical_arrays(lively_clip(model, synthetic)), 3.0: canonical_arrays(lively_clip(model, synthetic, 3.0))}


def findings(path, model, **kw):
    rep, clip, _ = inspect_motion(path, model, **kw)
    return rep, clip, [(f.level, f.message(str(path))) for f in rep.findings]


WRITERS = {
    "canonical": lambda p, a: write_canonical(p / "c.npz", a, permute=True),
    "canonical-unnamed": lambda p, a: write_canonical(p / "u.npz", a, names=False),
    "canonical-isaaclab": lambda p, a: write_isaac_lab(p / "i.npz", a, ClipKinematics(g1.load())),
    "holosoma": lambda p, a: write_holosoma(p / "h.npz", a),
    "csv": lambda p, a: write_csv(p / "l.csv", a),
    "csv-header": lambda p, a: write_csv(p / "n.csv", a, header=True),
}


@pytest.mark.parametrize("layout", list(WRITERS))
def test_each_format_round_trips_through_import(layout, arrays, model, tmp_path, capsys):
    src = WRITERS[layout](tmp_path, arrays)
    fmt = layout.split("-")[0]
    assert read_motion(src, g1.JOINT_NAMES, [model.body(b).name for b in range(1, model.nbody)]).format == fmt
    out = tmp_path / "out.npz"
    extra = ["--fps", "50"] if fmt == "csv" else []
    assert cli.main(["motion", "import", str(src), str(out), *extra]) == 0
    captured = capsys.readouterr()
    assert "wrote" in captured.out
    # the Isaac Lab order is recognised (and said); every other layout reads without a word
    assert ("Isaac Lab's breadth-first" in captured.err) == (layout == "canonical-isaaclab")
    assert ("warning" in captured.err) == (layout == "canonical-isaaclab")
    back = load_clip(out)
    assert back.fps == 50.0 and back.joint_names == g1.JOINT_NAMES
    for k in ARRAYS:  # the synthetic clip is at rest at frame 0 by construction; differences start there
        np.testing.assert_allclose(getattr(back, k)[1:], arrays[k][1:], atol=2e-5, err_msg=k)
    np.testing.assert_allclose(back.joint_vel[0], arrays["joint_vel"][0], atol=2e-3)


def test_import_resamples_and_states_the_csv_frame_rate(arrays, model, tmp_path, capsys):
    src = write_csv(tmp_path / "l.csv", arrays)
    out = tmp_path / "o.npz"
    assert cli.main(["motion", "import", str(src), str(out), "--fps", "50", "--out-fps", "30"]) == 0
    c = load_clip(out)
    assert c.fps == 30.0 and c.num_frames == 61
    np.testing.assert_allclose(c.joint_pos[30], arrays["joint_pos"][50], atol=1e-6)  # t = 1 s
    rep, _, msgs = findings(src, model)  # no --fps: LAFAN1's 30 assumed, said
    assert rep.source.fps == 30.0 and any("30 fps assumed" in m for _, m in msgs)


def mutate(a, **changes):
    out = {k: v.copy() for k, v in a.items()}
    out.update(changes)
    return out


def swap_hips(a):
    q = a["joint_pos"].copy()
    q[:, [0, 6]] = q[:, [6, 0]]
    return mutate(a, joint_pos=q)


# (name, writer (dir, the synthetic arrays, the lively ones by spin), expected level, expected text)
MISTAKES = [
    ("hip pitch swapped, no names", lambda p, a, b: write_canonical(p / "x.npz", swap_hips(b[0.0]), names=False),
     "error", "stored bodies disagree with forward kinematics"),
    ("xyzw body quaternions", lambda p, a, b: write_canonical(p / "x.npz", mutate(a, body_quat_w=a["body_quat_w"][..., [1, 2, 3, 0]])),
     "error", "quaternions stored (x, y, z, w)"),
    ("csv written w first", lambda p, a, b: write_csv(p / "x.csv", a, quat_order="wxyz"), "error", "quaternions stored (w, x, y, z)"),
    ("non-unit root quaternion", lambda p, a, b: write_csv(p / "x.csv", mutate(a, body_quat_w=a["body_quat_w"] * 1.02)),
     "warning", "normalised"),
    ("not a quaternion", lambda p, a, b: write_csv(p / "x.csv", mutate(a, body_quat_w=a["body_quat_w"] * 3.0)),
     "error", "expected 1"),
    ("centimetres", lambda p, a, b: write_csv(p / "x.csv", a, scale=100.0), "error", "positions in centimetres"),
    ("degrees", lambda p, a, b: write_canonical(p / "x.npz", mutate(a, joint_pos=np.rad2deg(a["joint_pos"]))),
     "error", "degrees: divided by 57.3"),
    ("fps 1e6", lambda p, a, b: write_canonical(p / "x.npz", mutate(a, fps=np.array([1e6]))), "error", "keeps 1 frame"),
    ("fps 0", lambda p, a, b: write_canonical(p / "x.npz", mutate(a, fps=np.array([0.0]))), "error", "expected a finite number > 0"),
    ("fps half the recording's", lambda p, a, b: write_holosoma(p / "x.npz", mutate(a, fps=np.array([25]))),
     "error", "they fit 50 fps"),
    ("unknown joint name", lambda p, a, b: write_canonical(p / "x.npz", a) and _rename(p / "x.npz"),
     "error", "lacks the model joints ['left_knee_joint']"),
    ("23 joints", lambda p, a, b: write_canonical(p / "x.npz", mutate(a, joint_pos=a["joint_pos"][:, :23],
                                                                   joint_vel=a["joint_vel"][:, :23]), names=False),
     "error", "has 23 joint columns, the G1 model has 29"),
    ("joint order scrambled, no bodies", lambda p, a, b: write_csv(p / "x.csv", mutate(a, joint_pos=a["joint_pos"][:, ::-1])),
     "error", "joint columns in another order"),
    ("zero joint_vel stored", lambda p, a, b: write_canonical(p / "x.npz", mutate(a, joint_vel=0 * a["joint_vel"])),
     "warning", "stored rates disagree with finite differences of joint_pos"),
    ("stored body velocities off", lambda p, a, b: write_canonical(p / "x.npz", mutate(a, body_lin_vel_w=a["body_lin_vel_w"] + 0.4)),
     "warning", "stored body velocities disagree with the poses by 0.693 m/s"),
    ("body-frame root rate", lambda p, a, b: write_holosoma(p / "x.npz", _body_frame_root_rate(b[3.0])),
     "warning", "in the body frame"),
    ("a slightly different model", lambda p, a, b: write_canonical(p / "x.npz", _shift_body(a, 0.03)),
     "warning", "stored bodies differ from forward kinematics"),
    ("terrain clip: floating", lambda p, a, b: write_csv(p / "x.csv", _lift(a, 0.3)), "error", "more than 5 cm above the floor"),
    ("terrain clip: below the floor", lambda p, a, b: write_csv(p / "x.csv", _lift(a, -0.08)), "error", "cm below the floor"),
    ("feet 2 cm in the floor", lambda p, a, b: write_csv(p / "x.csv", _lift(a, -0.02)), "warning", "the floor will push the robot out"),
    # issue 31: a clip sped up by dropping frames, fps unchanged: the stored rates fit about a tenth of it
    ("sped up 10x, holosoma", lambda p, a, b: write_holosoma(p / "x.npz", _every(b[0.0], 10)), "error", "fps, not 50"),
    ("sped up 3x, canonical", lambda p, a, b: write_canonical(p / "x.npz", _every(b[3.0], 3)), "error", "fps, not 50"),
    ("fps as text", lambda p, a, b: write_canonical(p / "x.npz", mutate(a, fps=np.array(["50"]))), "error", "fps: holds text"),
    ("fps as bytes", lambda p, a, b: write_canonical(p / "x.npz", mutate(a, fps=np.array([b"50"]))), "error", "fps: holds bytes"),
    ("complex joint_pos", lambda p, a, b: write_canonical(p / "x.npz", mutate(a, joint_pos=a["joint_pos"] + 0j)),
     "error", "joint_pos: holds complex numbers"),
    ("a NaN in body_ang_vel_w only", lambda p, a, b: write_canonical(p / "x.npz", _nan(a, "body_ang_vel_w", 40)),
     "error", "body_ang_vel_w: 1 non-finite value(s) (nan or inf) in 1 frame(s), the first at frame 40"),
    ("a NaN in holosoma's joint_vel", lambda p, a, b: write_holosoma(p / "x.npz", _nan(a, "joint_vel", 3)),
     "error", "joint_vel: 1 non-finite value"),
    ("an inf in a CSV row", lambda p, a, b: write_csv(p / "x.csv", _nan(a, "joint_pos", 5, np.inf)), "error", "(rows): 1 non-finite"),
    ("a clip of 0.5 s", lambda p, a, b: write_canonical(p / "x.npz", _first(a, 26)), "error", "under the 1 s a clip needs"),
    ("a CSV of the joints alone", lambda p, a, b: _joints_csv(p / "x.csv", a, header=False), "error", "the root columns are missing"),
    ("a CSV header of the joints alone", lambda p, a, b: _joints_csv(p / "x.csv", a, header=True), "error",
     "the header names joints in the first 7 columns"),
]


def _every(a, k):
    """Every k-th frame, the stated fps kept: the clip plays k times faster than it was recorded."""
    return {key: v[::k] if key not in ("fps", "body_names") else v for key, v in a.items()}


def _first(a, n):
    return {key: v[:n] if key not in ("fps", "body_names") else v for key, v in a.items()}


def _nan(a, key, frame, value=np.nan):
    out = mutate(a)
    out[key][frame].reshape(-1)[0] = value
    return out


def _joints_csv(path, a, header):
    names = ",".join(g1.JOINT_NAMES) if header else ""
    np.savetxt(path, a["joint_pos"], delimiter=",", header=names, comments="")
    path.write_text(path.read_text().lstrip("\n"))
    return path


def _rename(path):
    with np.load(path) as z:
        d = {k: z[k] for k in z.files}
    names = d["joint_names"].astype("<U40")
    names[3] = "left_knee_pitch_joint"
    d["joint_names"] = names
    with open(path, "wb") as f:
        np.savez(f, **d)
    return path


def _lift(a, dz):
    pos = a["body_pos_w"].copy()
    pos[..., 2] += dz
    return mutate(a, body_pos_w=pos)


def _shift_body(a, d):
    pos = a["body_pos_w"].copy()
    pos[:, 15, 0] += d  # torso_link, as holosoma's own G1 places it ~1 cm off duorl's
    return mutate(a, body_pos_w=pos)


def _body_frame_root_rate(a):
    from duorl.envs.motion.trajectory import quat_conj, quat_mul

    q, w = a["body_quat_w"][:, 0], a["body_ang_vel_w"].copy()
    v = np.concatenate((np.zeros((len(q), 1)), w[:, 0]), axis=1)
    w[:, 0] = quat_mul(quat_mul(quat_conj(q), v), q)[:, 1:]
    return mutate(a, body_ang_vel_w=w)


@pytest.mark.parametrize("name,write,level,text", MISTAKES, ids=[m[0] for m in MISTAKES])
def test_each_mistake_is_caught_with_its_message(name, write, level, text, arrays, lively, model, tmp_path):
    path = write(tmp_path, arrays, lively)
    try:
        rep, clip, msgs = findings(path, model)
    except ValueError as e:  # structural problems: raised while reading, with the same message shape
        msgs, clip = [("error", str(e))], None
    hits = [m for lv, m in msgs if lv == level and text in m]
    assert hits, f"{name}: expected a {level} with {text!r}, got {msgs}"
    assert str(path) in hits[0]  # every message names the file
    if level == "error":
        assert clip is None


def test_the_known_good_clip_has_no_finding(arrays, model, tmp_path):
    _, clip, msgs = findings(write_canonical(tmp_path / "ok.npz", arrays), model, action_range="joint_limits")
    assert msgs == [] and clip is not None


def test_pd_range_is_warned_when_it_cannot_reach_a_frame(arrays, model, tmp_path):
    q = arrays["joint_pos"].copy()
    q[:, g1.JOINT_NAMES.index("left_shoulder_roll_joint")] = 1.5  # 2.6 pd action units from the standing pose
    path = write_csv(tmp_path / "reach.csv", mutate(arrays, joint_pos=q))
    _, clip, msgs = findings(path, model, fps=50.0, action_range="pd")
    assert clip is not None and any("task.action_range=pd" in m and "left_shoulder_roll_joint" in m for _, m in msgs)
    assert findings(path, model, fps=50.0, action_range="joint_limits")[2] == []


def test_check_motion_file_raises_a_config_error_naming_the_key(arrays, tmp_path):
    bad = write_canonical(tmp_path / "deg.npz", mutate(arrays, joint_pos=np.rad2deg(arrays["joint_pos"])))
    with pytest.raises(ConfigError) as e:
        check_motion_file(task_config(TRACK, motion_file=str(bad)))
    msg = str(e.value)
    assert msg.startswith(f"task.motion_file={bad}: joint_pos: joint angles reach") and "degrees" in msg and "Fix: write radians" in msg
    warn = write_csv(tmp_path / "low.csv", _lift(arrays, -0.02))
    assert any("below the floor" in w for w in check_motion_file(task_config(TRACK, motion_file=str(warn))))
    assert check_motion_file(task_config(TRACK)) == []  # the synthetic clip
    assert source_of("pendulum_swingup").first_check(task_config("pendulum_swingup")) == []  # no clip to check


def test_train_refuses_a_bad_clip_before_the_run_directory_exists(arrays, tmp_path, capsys):
    bad = write_canonical(tmp_path / "bad.npz", mutate(arrays, body_quat_w=arrays["body_quat_w"][..., [1, 2, 3, 0]]))
    run = tmp_path / "run"
    rc = cli.main(["train", "--task", TRACK, "--sim", "mujoco", f"task.motion_file={bad}", f"training.log_dir={run}"])
    err = capsys.readouterr().err
    assert rc == 2 and not run.exists()
    assert err.count("task.motion_file=") == 1 and "(x, y, z, w)" in err and "Traceback" not in err


def test_inspect_reports_and_plots(arrays, tmp_path, capsys):
    good = write_holosoma(tmp_path / "h.npz", arrays)
    png = tmp_path / "clip.png"
    assert cli.main(["motion", "inspect", str(good), "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    for text in ("holosoma format, 101 frames at 50 fps", "left_hip_pitch_joint", "floor: lowest point",
                 "stored bodies vs forward kinematics", "task.action_range=pd", "verdict: usable"):
        assert text in out, text
    assert png.stat().st_size > 10_000 and png.read_bytes()[:4] == b"\x89PNG"
    bad = write_csv(tmp_path / "t.csv", _lift(arrays, 0.3))
    assert cli.main(["motion", "inspect", str(bad), "--fps", "50"]) == 2
    captured = capsys.readouterr()
    assert "verdict: not usable" in captured.out and "above the floor" in captured.err


def test_the_stored_rates_of_an_honest_clip_fit_its_fps(arrays, model, tmp_path):
    """The fps check's other side: the recorded clip in every layout with stored rates fits its own rate."""
    for path in (write_canonical(tmp_path / "c.npz", arrays), write_holosoma(tmp_path / "h.npz", arrays)):
        rep, clip, msgs = findings(path, model)
        assert clip is not None and not rep.errors, msgs
        assert rep.stats["joint_vel_fps_fit"] == pytest.approx(50.0, rel=0.01)


def test_import_never_writes_over_its_source(arrays, tmp_path, capsys):
    src = write_holosoma(tmp_path / "h.npz", arrays)
    before = src.read_bytes()
    (tmp_path / "link.npz").symlink_to(src)
    for out in (src, tmp_path / "sub" / ".." / "h.npz", tmp_path / "link.npz"):
        (tmp_path / "sub").mkdir(exist_ok=True)
        assert cli.main(["motion", "import", str(src), str(out)]) == 2
        err = capsys.readouterr().err
        assert "is SRC itself" in err and err.count("\n") == 1
    assert src.read_bytes() == before
