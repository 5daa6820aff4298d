"""mjlab's motion-tracking tasks: task.motion_file reaches mjlab's motion command, a clip duorl imported trains
and plays on the CPU, and a clip mjlab cannot use is refused before anything is built (exit 2, one line
naming task.motion_file, the file's array and the fix)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from duorl.cli.main import main
from tests.conftest import run_duorl

TASK = "mjlab:Mjlab-Tracking-Flat-Unitree-G1"
CPU = ["training.devices=[cpu]", "training.log_interval=1", "algo.learning_starts=1", "training.num_envs=2"]


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> Path:
    """A 2 s synthetic G1 clip, imported at mjlab's 50 Hz control rate (the documented commands)."""
    d = tmp_path_factory.mktemp("clip")
    for argv in (["motion", "synth", str(d / "synth.npz"), "--seconds", "2"],
                 ["motion", "import", str(d / "synth.npz"), str(d / "clip.npz"), "--out-fps", "50"]):
        r = subprocess.run([sys.executable, "-m", "duorl", *argv], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
    return d / "clip.npz"


def _refused(capsys, tmp_path: Path, *overrides: str, task: str = TASK) -> str:
    run = tmp_path / "run"
    assert main(["train", "--task", task, "--sim", "mjwarp", f"training.log_dir={run}", "training.devices=[cpu]",
                 *overrides]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: task.motion_file") and "\n" not in err, err
    assert not run.exists()
    return err


@pytest.fixture
def no_mjlab(monkeypatch):
    """mjlab's registry must not be reached (importing it alone takes 10 s here)."""
    import duorl.envs.mjlab.loader as loader

    monkeypatch.setattr(loader, "registry", lambda: pytest.fail("mjlab's registry was imported"))


def test_without_a_clip_it_is_refused_at_once_saying_how_to_make_one(capsys, tmp_path, no_mjlab):
    t0 = time.perf_counter()
    for task in (TASK, TASK + "-No-State-Estimation"):
        err = _refused(capsys, tmp_path, task=task)
        assert "needs task.motion_file=CLIP.npz" in err and "duorl motion import" in err and "--out-fps 50" in err
    assert time.perf_counter() - t0 < 5


def _write(path: Path, clip: Path, drop: str | None = None, **changes) -> Path:
    with np.load(clip) as d:
        arrays = {k: d[k] for k in d.files if k != drop}
    arrays.update(changes)
    np.savez(path, **arrays)
    return path


def test_bad_clips_are_refused_before_mjlab_with_one_line_each(capsys, tmp_path, clip, no_mjlab):
    """The checks that need no mjlab: the file, its arrays, their values and its own frame rate."""
    with np.load(clip) as d:
        q, qd = d["joint_pos"], d["joint_vel"]
    nan = q.copy()
    nan[7, 3] = np.nan
    cases = {
        "missing": (tmp_path / "none.npz", ["file: does not exist", "duorl motion import"]),
        "directory": (tmp_path, ["file: is a directory"]),
        "not an npz": (tmp_path / "text.npz", ["file: not readable as an .npz"]),
        "no body_quat_w": (_write(tmp_path / "nokey.npz", clip, drop="body_quat_w"), ["body_quat_w: missing"]),
        "a NaN": (_write(tmp_path / "nan.npz", clip, joint_pos=nan), ["joint_pos: 1 values not finite", "frame 7"]),
        "text": (_write(tmp_path / "str.npz", clip, joint_vel=np.full(qd.shape, "x")), ["joint_vel: holds <U1"]),
        "short joint_vel": (_write(tmp_path / "shape.npz", clip, joint_vel=qd[:-1]), ["joint_vel: shape [100, 29], expected [101, 29]"]),
        # every second frame dropped, fps kept: the stored rates fit 25 fps
        "sped up": (_write(tmp_path / "fast.npz", clip, **{k: np.load(clip)[k][::2] for k in
                    ("joint_pos", "joint_vel", "body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w")}),
                    ["joint_vel: the stored joint rates fit", "not the stated fps=50", "--fps"]),
    }
    (tmp_path / "text.npz").write_text("not a zip")
    t0 = time.perf_counter()
    for name, (path, says) in cases.items():
        err = _refused(capsys, tmp_path, f"task.motion_file={path}")
        for text in says:
            assert text in err, (name, text, err)
    assert time.perf_counter() - t0 < 10


@pytest.mark.slow  # imports mjlab: 10 s
def test_a_clip_of_another_robot_or_rate_is_refused_before_any_env(capsys, tmp_path, clip, monkeypatch):
    """The checks against mjlab's configuration: joint and body counts and names, the control rate."""
    import duorl.envs.mjlab.loader as loader

    monkeypatch.setattr(loader, "build_env", lambda *a, **k: pytest.fail("an env was built"))
    with np.load(clip) as d:
        a = {k: d[k] for k in d.files}
    names = list(a["joint_names"])
    names[0], names[1] = names[1], names[0]
    cases = {
        "23 joints": (_write(tmp_path / "j.npz", clip, joint_pos=a["joint_pos"][:, :23], joint_vel=a["joint_vel"][:, :23],
                             joint_names=a["joint_names"][:23]), ["joint_pos: 23 joints, the task's robot has 29"]),
        "swapped names": (_write(tmp_path / "n.npz", clip, joint_names=np.array(names)),
                          ["joint_names: column 0 is left_hip_roll_joint"]),
        "14 bodies": (_write(tmp_path / "b.npz", clip, drop="body_names", **{k: a[k][:, :14] for k in
                             ("body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w")}),
                      ["body_pos_w: 14 bodies, the task's robot has 30"]),
        "30 fps": (_write(tmp_path / "f.npz", clip, fps=np.array([30.0]), joint_vel=a["joint_vel"] * 30 / 50),
                   ["fps: 30, but mjlab plays one frame per control step", "--out-fps 50"]),
    }
    for name, (path, says) in cases.items():
        err = _refused(capsys, tmp_path, f"task.motion_file={path}")
        for text in says:
            assert text in err, (name, text, err)


@pytest.mark.slow  # imports mjlab: 10 s
def test_the_key_reaches_mjlabs_motion_command(clip):
    from duorl.envs.mjlab.loader import env_cfg
    from duorl.envs.task_sources import task_config

    cfg = env_cfg(TASK.split(":", 1)[1], task_config(TASK, motion_file=str(clip)), 2, 0)
    assert cfg.commands["motion"].motion_file == str(clip)


@pytest.mark.slow
def test_tracking_trains_three_iterations_and_plays(tmp_path, clip):
    run = tmp_path / "run"
    r = run_duorl(run, *CPU, "algo.max_iterations=3", "task.max_episode_steps=20", f"task.motion_file={clip}",
                  task=TASK, sim="mjwarp", timeout=400)
    assert r.returncode == 0, r.stderr[-4000:]
    summary = json.loads((run / "run_summary.json").read_text())
    assert summary["status"] == "completed" and summary["iterations"] == 3
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    names = summary["runtime_manifest"]["env_spec"]["metric_names"]
    for name in ("Episode_Reward/motion_global_root_pos", "Metrics/motion/error_anchor_pos",
                 "Episode_Termination/anchor_pos"):
        assert name in names, names
        assert all(np.isfinite(row[f"Task/{name}"]) for row in rows[1:]), name
    # the robot starts on the clip: its tracking reward is positive, its errors small but not zero
    assert rows[-1]["Task/Episode_Reward/motion_global_root_pos"] > 0
    p = subprocess.run([sys.executable, "-m", "duorl", "play", str(run), "--episodes", "1", "--json"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    played = json.loads(p.stdout)
    assert played["episodes"] == 1 and played["mean_length"] >= 1
    assert "Metrics/motion/error_anchor_pos" in played["metrics"]
