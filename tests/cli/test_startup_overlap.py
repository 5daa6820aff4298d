"""The collector's env built beside the learner's build (cli/train.py: checks, run directory, the collector's
env, learner; cli/train_steps/collector_env.py; runtime/prestart.PrestartedCollector.build), with real `duorl
train` processes: the order startup.json records, an env failure while the learner builds, a stop then, and
no process left behind. debug.learner_build_delay_ms holds the learner's build open, so that the order does
not depend on how fast this machine imports."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from duorl.runtime.outcome import exit_code
from tests.cli.test_startup import _children_of
from tests.conftest import duorl_cmd, run_duorl

HOLD_MS = 6000  # the learner's build held open this long: far above a collector's imports on a loaded CPU


def _phases(run_dir: Path) -> tuple[dict, dict]:
    rec = json.loads((run_dir / "startup.json").read_text())
    return {p["name"]: p for p in rec["learner"]}, {p["name"]: p for p in rec["collector"] or []}


def _gone(pid: int, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[-1].split()[0] == "Z":
                    return True
        except OSError:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.slow
def test_the_collector_builds_its_env_while_the_learner_builds(tmp_path: Path) -> None:
    run = tmp_path / "run"
    r = run_duorl(run, "algo.max_iterations=4", f"debug.learner_build_delay_ms={HOLD_MS}")
    assert r.returncode == 0, r.stderr[-3000:]
    learner, collector = _phases(run)
    # nothing is built before the checks passed: the env's arguments come after them
    assert collector["waiting for the checks"]["end_s"] >= learner["checks"]["end_s"] - 0.05
    assert collector["env"]["start_s"] >= learner["collector's env sent"]["start_s"] - 0.05
    # the env, the actor and the first observation are done while the learner is still being built
    assert collector["env"]["start_s"] < learner["learner"]["end_s"]
    assert collector["actor and reset"]["end_s"] < learner["learner"]["end_s"]
    # the rest (the tick, around the shared buffers) only once the learner handed them
    assert collector["views and tick"]["start_s"] >= learner["spawn"]["start_s"] - 0.05


@pytest.mark.slow
def test_an_env_failure_while_the_learner_builds_fails_the_run_at_once(tmp_path: Path) -> None:
    """The collector's env fails during the learner's build: the learner ends the run when it hands the
    collector the rest (no hang, no capture first), with the message, exit code and status of an env
    failure (docs/exit_codes.md), and no process of the run is left."""
    run = tmp_path / "run"
    t0 = time.monotonic()
    proc = subprocess.Popen(duorl_cmd(run, "algo.max_iterations=4", "debug.fail_env_build=true",
                                      f"debug.learner_build_delay_ms={HOLD_MS}"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _, err = proc.communicate(timeout=HOLD_MS / 1e3 + 90)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    elapsed = time.monotonic() - t0
    assert proc.returncode == exit_code("failed") == 1, err[-3000:]
    m = re.search(r"duorl: error: collector \(pid (\d+)\) failed: collector failed in phase 'building env':", err)
    assert m, err[-3000:]
    assert "debug.fail_env_build" in err and "while the learner waited for the collector to build its env" in err
    summary = json.loads((run / "run_summary.json").read_text())
    assert summary["status"] == "failed" and summary["failed_part"] == "collector", summary
    learner, collector = _phases(run)
    # it failed while the learner was built, and the learner stopped at its spawn: no wait, no capture
    assert collector["env"]["end_s"] < learner["learner"]["end_s"]
    assert "waiting for the collector's env" not in learner and "graph capture" not in learner
    assert elapsed < HOLD_MS / 1e3 + 60
    assert _gone(int(m.group(1)), 5) and _gone(proc.pid, 5)
    assert not _children_of(proc.pid)


@pytest.mark.slow
def test_a_stop_while_the_env_and_the_learner_build_ends_cleanly(tmp_path: Path) -> None:
    """Ctrl-C (SIGINT to the whole process group) while the collector builds its env and the learner its
    networks: a clean stop (exit 0, status interrupted, no checkpoint of an untrained learner needed) within
    the contract's 30 s of the learner's build, every process gone."""
    run = tmp_path / "run"
    proc = subprocess.Popen(duorl_cmd(run, "algo.max_iterations=4", f"debug.learner_build_delay_ms={HOLD_MS}"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        collectors: list[int] = []
        while not (run / "run_config.json").exists() and proc.poll() is None and time.monotonic() < deadline:
            collectors = collectors or _children_of(proc.pid)
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        collectors = collectors or _children_of(proc.pid)
        assert collectors, "no collector process beside the learner's build"
        time.sleep(1.0)  # the run directory is claimed, the env's arguments sent: the overlapped phase
        os.killpg(proc.pid, signal.SIGINT)
        t_sig = time.monotonic()
        _, err = proc.communicate(timeout=HOLD_MS / 1e3 + 60)
        assert time.monotonic() - t_sig < HOLD_MS / 1e3 + 30
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, err[-3000:]
    summary = json.loads((run / "run_summary.json").read_text())
    assert summary["status"] == "interrupted", summary
    assert all(_gone(pid, 5) for pid in collectors) and not _children_of(proc.pid)
