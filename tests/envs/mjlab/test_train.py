"""mjlab tasks through the real duo on the CPU (Warp's CPU device): the velocity tasks of both robots log
their Task/ rows; a cartpole run checkpoints, exports, plays (mjlab's play configuration) and resumes;
two gloo ranks train one policy."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import TINY, run_duorl
from tests.distributed.conftest import DP, dp_env

CPU = ["training.devices=[cpu]", "training.log_interval=1", "algo.learning_starts=1"]


def _mjlab(run_dir, task_id: str, *overrides: str, timeout: float = 400):
    return run_duorl(run_dir, *CPU, *overrides, task=f"mjlab:{task_id}", sim="mjwarp", timeout=timeout)


def _rows(run_dir) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def _summary(run_dir) -> dict:
    return json.loads((run_dir / "run_summary.json").read_text())


@pytest.mark.parametrize("robot,task_rows", [
    ("Go1", ["Episode_Reward/track_linear_velocity", "Episode_Termination/fell_over", "Metrics/twist/error_vel_xy",
             "Episode_Metrics/mean_action_acc"]),
    # 17 logged terms: the 16 rows keep the rewards, the fall and the command's metrics
    ("G1", ["Episode_Reward/track_linear_velocity", "Episode_Reward/self_collisions", "Episode_Termination/fell_over",
            "Metrics/twist/error_vel_yaw"]),
])
def test_velocity_task_trains_three_iterations_with_task_rows(tmp_path, robot, task_rows):
    run = tmp_path / "run"
    r = _mjlab(run, f"Mjlab-Velocity-Flat-Unitree-{robot}", "algo.max_iterations=3", "training.num_envs=2")
    assert r.returncode == 0, r.stderr[-4000:]
    s = _summary(run)
    assert s["status"] == "completed" and s["iterations"] == 3
    rows = _rows(run)
    assert [row["iteration"] for row in rows] == [1, 2, 3]
    # a row shows the collector's statistics of the iteration before it: from the second row on
    for name in task_rows:
        assert all(np.isfinite(row[f"Task/{name}"]) for row in rows[1:]), name
    names = s["runtime_manifest"]["env_spec"]["metric_names"]
    assert len(names) <= 16 and set(task_rows) <= set(names)
    # the velocity tasks reward tracking: a positive per-step reward rate for it
    assert rows[-1]["Task/Episode_Reward/track_linear_velocity"] > 0
    tick = s["runtime_manifest"]["collector_tick_cuda_graph"]
    assert tick["enabled"] is False and tick["active"] is False and "host" in tick["eager_reason"]


CARTPOLE = "Mjlab-Cartpole-Swingup"
SHORT = ["task.max_episode_steps=10", "training.num_envs=4"]


@pytest.fixture(scope="module")
def cartpole_run(tmp_path_factory):
    """4 iterations, checkpoints every 2, the policy exported, post-train play on."""
    run = tmp_path_factory.mktemp("mjlab") / "run"
    r = _mjlab(run, CARTPOLE, *SHORT, "algo.max_iterations=4", "algo.save_interval=2", "training.export_onnx=true",
               "training.no_play=false")
    assert r.returncode == 0, r.stderr[-4000:]
    assert "play: mean return" in r.stdout
    return run


def test_cartpole_run_checkpoints_and_exports(cartpole_run):
    import onnxruntime as ort

    s = _summary(cartpole_run)
    assert s["status"] == "completed" and s["iterations"] == 4
    ckpts = sorted(p.name for p in (cartpole_run / "checkpoints").glob("*.pt"))
    assert len(ckpts) >= 2, ckpts
    assert s["runtime_manifest"]["env_spec"]["task"] == f"mjlab:{CARTPOLE}"
    assert set(s["export"]) == {"onnx", "safetensors"}
    sess = ort.InferenceSession(str(cartpole_run / "export" / "policy.onnx"))
    action = sess.run(None, {"obs": np.zeros((3, 5), dtype=np.float32)})[0]
    assert action.shape == (3, 1) and np.all(np.abs(action) <= 1)


def test_play_uses_the_play_configuration_and_is_deterministic(cartpole_run):
    cmd = [sys.executable, "-m", "duorl", "play", str(cartpole_run), "--episodes", "2", "--json"]
    r1 = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    r2 = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r1.returncode == 0, r1.stderr[-3000:]
    a, b = json.loads(r1.stdout), json.loads(r2.stdout)
    assert a == b
    # mjlab's play configuration never times out; duorl play ends its episodes at the run's length
    assert a["episodes"] == 2 and a["mean_length"] == 10.0 and a["iteration"] == 4
    assert set(a["metrics"]) == {"Episode_Reward/smooth_reward"}


def test_resume_continues_from_a_checkpoint(cartpole_run, tmp_path):
    resumed = tmp_path / "resumed"
    r = _mjlab(resumed, CARTPOLE, *SHORT, "algo.max_iterations=6", "algo.save_interval=2",
               f"training.resume={cartpole_run}")
    assert r.returncode == 0, r.stderr[-4000:]
    s = _summary(resumed)
    assert s["status"] == "completed" and s["iterations"] == 6
    origin = s["runtime_manifest"]["resumed_from"]
    # an mjlab env keeps no state duorl can restore: the resumed run starts new episodes
    assert origin["iteration"] == 4 and origin["collector_state"] is False and origin["restarts"] == []
    assert [row["iteration"] for row in _rows(resumed)] == [5, 6]


def test_two_cpu_ranks_train_an_mjlab_task(tmp_path):
    run = tmp_path / "dp"
    cmd = [sys.executable, "-m", "duorl", "train", "--algo", "sac", "--task", f"mjlab:{CARTPOLE}", "--sim", "mjwarp",
           f"training.log_dir={run}", *TINY, *DP, *SHORT, "training.num_envs=2", "algo.max_iterations=3",
           "training.log_interval=1", "algo.learning_starts=1"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=500, env=dp_env())
    assert r.returncode == 0, r.stderr[-4000:]
    s = _summary(run)
    assert s["status"] == "completed" and s["iterations"] == 3
    assert s["runtime_manifest"]["world_size"] == 2 and s["dp_learner_state"]["equal"]
    assert s["env_steps"] == 2 * 3 * 2  # both ranks' steps
    assert "Task/Episode_Reward/smooth_reward" in _rows(run)[-1]


@pytest.mark.cuda
def test_velocity_task_on_cuda_runs_its_tick_eagerly(tmp_path):
    """On a GPU (`pytest -m cuda`; not run on the CPU machines): mjlab's step syncs the host, so the tick
    is not captured although sim.tick_cuda_graph defaults to on for CUDA envs."""
    run = tmp_path / "cuda"
    r = run_duorl(run, "training.devices=[0]", "training.log_interval=1", "algo.learning_starts=1",
                  "algo.max_iterations=3", "training.num_envs=64", task="mjlab:Mjlab-Velocity-Flat-Unitree-Go1",
                  sim="mjwarp", timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    s = _summary(run)
    assert s["status"] == "completed" and s["runtime_manifest"]["env_device"].startswith("cuda")
    tick = s["runtime_manifest"]["collector_tick_cuda_graph"]
    assert tick["enabled"] is False and tick["active"] is False and tick["eager_reason"]
    assert "Task/Episode_Reward/track_linear_velocity" in _rows(run)[-1]
