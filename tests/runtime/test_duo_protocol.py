"""The duo's protocol with real processes: determinism under skewed timing, the replay window,
liveness in both directions, and SIGINT."""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch

from duorl.runtime.checkpoint import latest_checkpoint, load_checkpoint
from tests.conftest import duorl_cmd, run_duorl
from tests.runtime.faults import alive, assert_all_gone

ITERS = ["algo.max_iterations=8", "algo.save_interval=100"]


def _final_state(run_dir: Path) -> dict:
    return load_checkpoint(latest_checkpoint(run_dir))["learner"]


def _assert_bitwise_equal(a, b, path="learner"):
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape, path
        assert torch.equal(a, b), path
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            _assert_bitwise_equal(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_bitwise_equal(x, y, f"{path}[{i}]")
    else:
        assert a == b, path


@pytest.mark.slow
def test_weights_identical_whatever_process_is_slow(tmp_path):
    runs = {
        "plain": [],
        "slow_collector": ["debug.collector_delay_ms=150"],
        "slow_learner": ["debug.learner_delay_ms=150"],
    }
    states = {}
    for name, extra in runs.items():
        r = run_duorl(tmp_path / name, *ITERS, *extra)
        assert r.returncode == 0, r.stderr[-3000:]
        summary = json.loads((tmp_path / name / "run_summary.json").read_text())
        assert summary["status"] == "completed" and summary["iterations"] == 8
        states[name] = _final_state(tmp_path / name)
    # the learner really trained (else equality would be trivial)
    m = [json.loads(line) for line in (tmp_path / "plain" / "metrics.jsonl").read_text().splitlines()]
    assert any("Loss/critic" in row for row in m)
    _assert_bitwise_equal(states["plain"], states["slow_collector"])
    _assert_bitwise_equal(states["plain"], states["slow_learner"])


@pytest.mark.slow
def test_learner_never_samples_rows_being_written(tmp_path):
    # a ring of 6 ticks with 2 ticks per iteration wraps every 3 iterations; 8 envs: one batch (32) fits
    r = run_duorl(
        tmp_path / "w",
        "algo.max_iterations=30",
        "algo.buffer_size=6",
        "training.num_envs=8",
        "training.env_steps_per_sync=2",
        "algo.learning_starts=2",
        "debug.check_replay_window=true",
        "debug.learner_delay_ms=5",
    )
    assert r.returncode == 0, r.stderr[-3000:]
    check = json.loads((tmp_path / "w" / "run_summary.json").read_text())["replay_window_check"]
    assert check["samples_checked"] >= 25 * 2 * 32
    assert check["violations"] == 0


def _start(run_dir: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        duorl_cmd(run_dir, "algo.max_iterations=100000", "algo.save_interval=100000", *extra),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _wait_for_iterations(run_dir: Path, proc: subprocess.Popen, n: int, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        metrics = run_dir / "metrics.jsonl"
        if metrics.exists() and len(metrics.read_text().splitlines()) >= n:
            return json.loads((run_dir / "run_summary.json").read_text())
        time.sleep(0.2)
    raise AssertionError(f"no {n} iterations within {timeout} s")


@pytest.mark.slow
def test_killing_the_collector_fails_the_run_naming_it(tmp_path):
    proc = _start(tmp_path / "k")
    try:
        summary = _wait_for_iterations(tmp_path / "k", proc, 3)
        collector = summary["runtime_manifest"]["collector_pid"]
        os.kill(collector, signal.SIGKILL)
        t0 = time.monotonic()
        _, err = proc.communicate(timeout=30)
        assert time.monotonic() - t0 < 30
        assert proc.returncode != 0
        assert "collector" in err and str(collector) in err and "killed by signal 9" in err
        final = json.loads((tmp_path / "k" / "run_summary.json").read_text())
        assert final["status"] == "failed" and "collector" in final["error"]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def test_killing_the_learner_leaves_no_collector(tmp_path):
    proc = _start(tmp_path / "l")
    try:
        summary = _wait_for_iterations(tmp_path / "l", proc, 3)
        collector = summary["runtime_manifest"]["collector_pid"]
        assert alive(collector)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        assert_all_gone([collector])
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


@pytest.mark.slow
def test_sigint_exits_cleanly_with_a_loadable_checkpoint(tmp_path):
    proc = _start(tmp_path / "i")
    try:
        summary = _wait_for_iterations(tmp_path / "i", proc, 5)
        collector = summary["runtime_manifest"]["collector_pid"]
        # Ctrl-C in a terminal reaches the whole process group
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err[-3000:]
        assert "Traceback" not in err
        final = json.loads((tmp_path / "i" / "run_summary.json").read_text())
        assert final["status"] == "interrupted" and final["iterations"] >= 5
        ckpt = load_checkpoint(latest_checkpoint(tmp_path / "i"))
        assert ckpt["header"]["iteration"] == final["iterations"]
        assert not alive(collector)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    # the checkpoint loads into a fresh learner
    from duorl.algos.registry import make_learner
    from duorl.cli.configure import load_config
    from duorl.envs.registry import env_spec

    cfg = load_config("sac", "pendulum_swingup", "mujoco", _tiny_algo())
    learner = make_learner(cfg.algo, env_spec(cfg.task), torch.device("cpu"), 0)
    learner.load_state_dict(ckpt["learner"])


def _tiny_algo() -> list[str]:
    from tests.conftest import TINY

    return [o for o in TINY if o.startswith("algo.")]


@pytest.mark.slow
def test_a_g1_walk_run_logs_every_task_metric(tmp_path):
    """All 13 task diagnostics of g1_walk_flat cross the control block (task_metric_0..12) into
    metrics.jsonl, and the reward terms' contributions add up to the logged mean reward. With
    training.eval_envs the deterministic envs' episodes and diagnostics arrive too, as Eval/*."""
    from duorl.envs.tasks.g1_walk import METRIC_NAMES

    run = tmp_path / "run"
    p = run_duorl(run, "training.num_envs=4", "training.eval_envs=1", "algo.max_iterations=6",
                  "algo.learning_starts=2", "algo.buffer_size=16", "training.log_interval=1",
                  "task.max_episode_steps=3", task="g1_walk_flat")
    assert p.returncode == 0, p.stderr
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    last = next(r for r in reversed(rows) if "Task/lin_vel_error" in r)
    assert set(f"Task/{n}" for n in METRIC_NAMES) <= set(last)
    assert set(f"Eval/{n}" for n in METRIC_NAMES) <= set(last)
    contributions = sum(v for k, v in last.items() if k.startswith("Task/rew_"))
    assert abs(contributions - last["Train/mean_reward"]) < 1e-4
    # one curriculum scale for every env; 3-step episodes, nobody falls that fast
    assert last["Eval/penalty_scale"] == last["Task/penalty_scale"]
    assert last["Train/mean_episode_length"] == 3.0 and last["Eval/mean_episode_length"] == 3.0
    assert last["Eval/rew_alive"] == pytest.approx(10.0 * 0.02)
    # the default (ppo) schedule starts at 0.1 and shrinks by 0.025% a step while episodes are short
    assert 0.0995 < last["Task/penalty_scale"] < 0.1


def test_one_count_of_env_steps_everywhere(tmp_path):
    """Issue 31: "completed 20 iterations, 160 env steps" against 152 in the metrics and the plot title. The
    collector is slowed so that it lags the learner's log: every count is iterations x
    env_steps_per_sync x num_envs all the same (the final message, every metrics row, the periodic and
    final checkpoints, the summary and the plot's title)."""
    from duorl.telemetry.metrics_file import read_metrics
    from duorl.telemetry.plots import title_lines

    run = tmp_path / "run"
    r = run_duorl(run, "training.num_envs=8", "training.env_steps_per_sync=2", "algo.max_iterations=10",
                  "algo.save_interval=4", "debug.collector_delay_ms=40")
    assert r.returncode == 0, r.stderr[-3000:]
    steps = 10 * 2 * 8
    assert f"completed 10 iterations, {steps} env steps" in r.stdout
    # 20 steps of 200-step episodes: none ended, and the final line says so (issue #39)
    final = next(line for line in r.stdout.splitlines() if line.startswith("duorl: completed"))
    assert final.endswith("; no episode finished yet"), final
    rows = read_metrics(run / "metrics.jsonl")
    assert [row["env_steps"] for row in rows] == [row["iteration"] * 2 * 8 for row in rows] and rows[-1]["iteration"] == 10
    assert json.loads((run / "run_summary.json").read_text())["env_steps"] == steps
    assert load_checkpoint(run / "checkpoints" / "iter_000004.pt")["header"]["env_steps"] == 4 * 2 * 8
    assert load_checkpoint(latest_checkpoint(run))["header"]["env_steps"] == steps
    assert f"10 it, {steps} env steps" in title_lines(run, rows, json.loads((run / "run_config.json").read_text()))[1]
