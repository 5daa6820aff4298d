"""Post-train export (ONNX + safetensors) and `duorl play` on a run of the small task."""

import json
import os
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from tests.conftest import TINY, run_duorl


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("play") / "run"
    r = run_duorl(run_dir, "algo.max_iterations=6", "training.export_onnx=true", "training.no_play=false")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "play: mean return" in r.stdout
    return run_dir


@pytest.mark.slow
def test_onnx_policy_matches_torch(run):
    import onnxruntime as ort
    from safetensors.torch import load_file

    from duorl.algos.registry import make_actor
    from duorl.cli.configure import load_config
    from duorl.envs.registry import env_spec

    summary = json.loads((run / "run_summary.json").read_text())
    assert set(summary["export"]) == {"onnx", "safetensors"}
    cfg = load_config("sac", "pendulum_swingup", "mujoco", [o for o in TINY if o.startswith("algo.")])
    actor = make_actor(cfg.algo, env_spec(cfg.task), torch.device("cpu"))
    actor.load_state_dict(load_file(str(run / "export" / "policy.safetensors")))
    # the normaliser was trained: folding it in matters for this comparison
    assert not torch.equal(actor.obs_norm.mean, torch.zeros_like(actor.obs_norm.mean))
    obs = torch.randn(257, 3) * 2
    with torch.no_grad():
        expected = actor.act(obs).numpy()
    sess = ort.InferenceSession(str(run / "export" / "policy.onnx"))
    got = sess.run(None, {"obs": obs.numpy()})[0]
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=0)


@pytest.mark.slow
def test_play_prints_evaluation_metrics(run):
    cmd = [sys.executable, "-m", "duorl", "play", str(run), "--episodes", "3", "--json"]
    r1 = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    r2 = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r1.returncode == 0, r1.stderr
    a, b = json.loads(r1.stdout), json.loads(r2.stdout)
    assert a == b  # deterministic
    assert a["episodes"] == 3 and a["mean_length"] == 200.0 and a["iteration"] == 6
    assert a["min_return"] <= a["mean_return"] <= a["max_return"]
    table = subprocess.run(cmd[:-1], capture_output=True, text=True, timeout=120)
    assert table.returncode == 0 and "return       mean" in table.stdout


@pytest.mark.slow
def test_play_video_without_gl_is_a_clear_message(run, tmp_path):
    env = {"MUJOCO_GL": "egl", "PATH": "/usr/bin:/bin"}
    if "PYTHONPATH" in os.environ:  # the tree under test, not whatever the interpreter has installed
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    r = subprocess.run(
        [sys.executable, "-m", "duorl", "play", str(run), "--episodes", "1", "--video", str(tmp_path / "v.mp4")],
        capture_output=True, text=True, timeout=120, env=env,
    )
    if r.returncode == 0:  # a machine with a working GL backend records the video
        assert (tmp_path / "v.mp4").stat().st_size > 0
    else:  # refused before any episode: nothing played, nothing written
        assert r.returncode == 2 and "OpenGL" in r.stderr and "Traceback" not in r.stderr
        assert r.stdout == "" and not (tmp_path / "v.mp4").exists()


@pytest.mark.parametrize("video", ["gl", "/proc/duorl/v.mp4"])
def test_play_video_is_checked_before_any_episode(run, tmp_path, monkeypatch, capsys, video):
    """Without OpenGL (faked: this machine may have it) or with an unwritable path, play refuses (exit 2)
    before it builds an env or plays an episode."""
    import duorl.cli.play as play
    import duorl.envs.registry as registry
    from duorl.cli.main import main

    def no_gl(*_a, **_k):
        raise play.PlayError("--video: MuJoCo's renderer needs an OpenGL backend, and none works here. Fix: ...")

    def no_envs(*_a, **_k):
        raise AssertionError("an env was built before the video was checked")

    monkeypatch.setattr(play, "_renderer", no_gl)
    monkeypatch.setattr(registry, "make_vec_env", no_envs)
    out = str(tmp_path / "v.mp4") if video == "gl" else video
    assert main(["play", str(run), "--episodes", "1", "--video", out]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert ("OpenGL" if video == "gl" else "--video=/proc/duorl/v.mp4: cannot be written") in captured.err
    assert not (tmp_path / "v.mp4").exists()


def test_play_rejects_a_directory_that_is_no_run(tmp_path):
    r = subprocess.run([sys.executable, "-m", "duorl", "play", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "not a duorl run directory" in r.stderr


@pytest.mark.slow
def test_play_reports_the_task_metrics_of_the_deterministic_policy(tmp_path):
    """g1_walk_flat's diagnostics (velocity errors, each reward term's share) come out of `duorl play`
    as means over every step: 3-step episodes that all last, so the shares add up to return / length."""
    from duorl.envs.tasks.g1_walk import METRIC_NAMES

    run = tmp_path / "run"
    p = run_duorl(run, "training.num_envs=4", "algo.max_iterations=3", "algo.learning_starts=2",
                  "algo.buffer_size=16", "task.max_episode_steps=3", task="g1_walk_flat")
    assert p.returncode == 0, p.stderr
    r = subprocess.run([sys.executable, "-m", "duorl", "play", str(run), "--episodes", "2", "--json"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert tuple(out["metrics"]) == METRIC_NAMES
    assert out["mean_length"] == 3.0
    m = out["metrics"]
    assert m["rew_alive"] == pytest.approx(10.0 * 0.02)
    assert m["lin_vel_error"] >= 0.0 and m["ang_vel_error"] >= 0.0
    shares = sum(v for k, v in m.items() if k.startswith("rew_"))
    assert shares == pytest.approx(out["mean_return"] / out["mean_length"], rel=1e-4, abs=1e-6)


def test_the_video_writer_is_an_mp4_encoder_or_a_clear_error(monkeypatch, tmp_path):
    """imageio without an MP4 plugin picks a writer that refuses fps (seen on a GPU machine with only
    tifffile): the encoder is chosen, or refused with the install line, before any episode runs."""
    import importlib.util

    import imageio.v3 as iio

    from duorl.cli.play import PlayError, _mp4_writer

    frames = np.zeros((5, 48, 64, 3), dtype=np.uint8)
    out = tmp_path / "v.mp4"
    iio.imwrite(out, frames, fps=50, **_mp4_writer())  # the test extra installs imageio[ffmpeg]
    assert iio.improps(out, plugin="FFMPEG").shape[1:] == (48, 64, 3)

    real = importlib.util.find_spec
    for missing, expect in ((("imageio_ffmpeg",), {"plugin": "pyav", "codec": "libx264"}),
                            (("imageio_ffmpeg", "av"), "an MP4 encoder"), (("imageio",), "imageio with ffmpeg")):
        def find_spec(name, *a, m=missing):  # PyAV "installed" unless named missing
            return None if name in m else (object() if name == "av" else real(name, *a))
        monkeypatch.setattr(importlib.util, "find_spec", find_spec)
        if isinstance(expect, dict):
            assert _mp4_writer() == expect
        else:
            with pytest.raises(PlayError, match=expect):
                _mp4_writer()


def test_an_env_that_draws_itself_is_recorded_from_its_own_frames(tmp_path):
    """An mjlab task is a whole VecEnv with its own offscreen renderer: the recorder takes its
    render_frame() (env 0, its viewer's camera) instead of drawing a duorl Task's model."""
    import imageio.v3 as iio

    from duorl.cli.play import _mp4_writer, _VideoRecorder

    class DrawsItself:
        spec = SimpleNamespace(control_dt=0.04)  # 25 frames per second

        def __init__(self) -> None:
            self.calls = 0

        def render_frame(self) -> np.ndarray:
            self.calls += 1
            return np.full((48, 64, 3), 40 * self.calls, dtype=np.uint8)

    env = DrawsItself()
    recorder = _VideoRecorder(env, _mp4_writer())
    for _ in range(6):
        recorder.frame()
    out = recorder.write(str(tmp_path / "v.mp4"))
    assert env.calls == 6
    frames = iio.imread(out, plugin="FFMPEG")
    assert frames.shape == (6, 48, 64, 3)
    assert iio.immeta(out, plugin="FFMPEG")["fps"] == 25
    # the frames are the env's own, in order (MP4 is lossy: compare mean brightness)
    assert [round(float(f.mean()) / 40) for f in frames] == [1, 2, 3, 4, 5, 6]
