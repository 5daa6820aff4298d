"""A run's start-up: its console lines and startup.json (duorl/startup_phases.py), the collector started
before the learner is built (runtime/prestart.PrestartedCollector), and `duorl warmup`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import TINY, duorl_cmd, run_duorl

LEARNER = ["interpreter", "config", "imports", "checks", "run directory", "collector's env sent", "learner", "reporting",
           "buffers", "spawn", "waiting for the collector's env", "first iteration", "first iteration on collected ticks",
           "first update"]
COLLECTOR = ["imports", "waiting for the config", "imports ahead", "waiting for the checks", "device", "env", "actor and reset",
             "waiting for the learner", "views and tick", "first tick", "first iteration"]


@pytest.mark.slow
def test_a_run_says_its_start_up_and_writes_the_table(tmp_path: Path) -> None:
    run = tmp_path / "run"
    r = run_duorl(run, "algo.max_iterations=6")
    assert r.returncode == 0, r.stderr[-3000:]
    lines = [line for line in r.stdout.splitlines() if line.startswith("duorl: start-up")]
    assert 4 <= len(lines) <= 10, lines
    assert any("learner ready, collector spawned: interpreter" in line for line in lines), lines
    assert any("collector's env built: imports" in line and ", waiting for the config " in line for line in lines), lines
    assert lines[-1].endswith(f"first update; every phase of both processes in {run / 'startup.json'}"), lines
    rec = json.loads((run / "startup.json").read_text())
    assert [p["name"] for p in rec["learner"]] == LEARNER
    assert [p["name"] for p in rec["collector"]] == COLLECTOR
    for p in rec["learner"] + rec["collector"]:
        assert p["seconds"] >= 0 and p["end_s"] >= p["start_s"] >= -0.05, p
    learner = {p["name"]: p for p in rec["learner"]}
    collector = {p["name"]: p for p in rec["collector"]}
    # the collector's process started before the learner was built, and its env before its first ticks
    assert rec["collector_process_start_s"] < learner["learner"]["start_s"]
    assert collector["env"]["end_s"] <= learner["first iteration on collected ticks"]["end_s"] + 0.05
    assert learner["first update"]["end_s"] == max(p["end_s"] for p in rec["learner"])
    # the learner's build and the collector's env say where their seconds went (a CPU run: no CUDA
    # initialisation, no data parallel; MuJoCo's own backend)
    build, env = learner["learner"], collector["env"]
    assert "cuda_device_s" not in build and "ranks_joined_s" not in build, build
    assert 0 <= build["dynamo_import_s"] + build["networks_s"] <= build["seconds"] + 0.01, build
    assert 0 <= env["model_s"] + env["simulator_s"] + env["wrapper_s"] <= env["seconds"] + 0.01, env


def test_a_prestarted_collector_that_is_never_needed_is_ended() -> None:
    from duorl.runtime.prestart import PrestartedCollector

    pre = PrestartedCollector()
    assert pre.process.is_alive()
    t0 = time.monotonic()
    pre.cancel()
    assert not pre.process.is_alive() and time.monotonic() - t0 < 10
    pre.cancel()  # twice: nothing more


def _children_of(pid: int) -> list[int]:
    """Live processes that a duorl process with this pid started as its collector (runtime/orphans.py names
    the parent in the child's environment)."""
    mark = f"DUORL_PARENT_PID={pid}:collector".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if mark in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


@pytest.mark.slow
def test_a_refused_run_leaves_no_collector(tmp_path: Path) -> None:
    """The checks refuse after the collector's process started (an existing run directory): exit 2, and no
    process of this run is left."""
    run = tmp_path / "exists"
    run.mkdir()
    proc = subprocess.Popen(duorl_cmd(run, "algo.max_iterations=2"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    seen: list[int] = []
    while proc.poll() is None:  # the prestarted collector exists while the learner checks
        seen = seen or _children_of(proc.pid)
        time.sleep(0.02)
    assert proc.returncode == 2, proc.stderr.read()[-3000:] if proc.stderr else ""
    assert seen, "no collector process was started ahead of the checks"
    deadline = time.monotonic() + 5
    while _children_of(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _children_of(proc.pid)


@pytest.mark.slow
def test_warmup_runs_the_start_of_a_run_and_keeps_nothing_but_caches(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONUNBUFFERED="1", TMPDIR=str(tmp_path))
    r = subprocess.run([sys.executable, "-m", "duorl", "warmup", "--task", "pendulum_swingup", "--sim", "mujoco", *TINY],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "duorl: warmup: pendulum_swingup (sac, mujoco, 4 envs) compiled in " in r.stdout, r.stdout[-2000:]
    assert "starts warm on this machine" in r.stdout
    assert not list(tmp_path.glob("duorl-warmup-*")), "the warm-up's run directory was left behind"


def test_warmup_refuses_a_bad_key_like_train() -> None:
    r = subprocess.run([sys.executable, "-m", "duorl", "warmup", "--task", "pendulum_swingup", "algo.no_such_key=1"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "algo.no_such_key" in r.stderr, r.stderr[-2000:]
