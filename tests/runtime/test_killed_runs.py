"""Issue #39's local faults with real `duorl train` runs: kill -9 in a run's first seconds, kill -9 of
every process of a data-parallel run, a double Ctrl-C, resuming a run that is only stopped. Each moment
is found by polling a file or a line of the run, never by a guessed sleep. Results before and after:
benchmarks/2026-12-02_fault_round4_cpu/local_faults.md."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import _env, duorl_cmd
from tests.distributed.conftest import DP, assert_all_gone

SHORT = ["training.no_play=true", "algo.max_iterations=100000"]


class _Run:
    """A `duorl train` in its own session, its stderr collected line by line."""

    def __init__(self, cmd: list[str], env: dict[str, str]) -> None:
        self.p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
                                  start_new_session=True)
        self.lines: list[str] = []
        threading.Thread(target=lambda: self.lines.extend(self.p.stderr), daemon=True).start()  # type: ignore[arg-type]

    def until(self, cond, timeout: float = 240.0, poll: float = 0.01) -> None:
        deadline = time.monotonic() + timeout
        while not cond():
            assert self.p.poll() is None, f"ended ({self.p.returncode}) first: {''.join(self.lines[-10:])}"
            assert time.monotonic() < deadline, f"timed out: {''.join(self.lines[-10:])}"
            time.sleep(poll)

    def end(self) -> None:
        if self.p.poll() is None:
            os.killpg(self.p.pid, signal.SIGKILL)
            os.killpg(self.p.pid, signal.SIGCONT)
        self.p.wait(timeout=30)


def _summary(run: Path) -> dict:
    try:
        return json.loads((run / "run_summary.json").read_text())
    except (OSError, ValueError):
        return {}


def _train(run: Path, *overrides: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(duorl_cmd(run, "training.no_play=true", *overrides), capture_output=True, text=True,
                          timeout=timeout, env=env or _env())


@pytest.mark.slow
def test_a_run_killed_at_its_claim_says_so_and_its_directory_trains_again(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run = _Run(duorl_cmd(run_dir, *SHORT), _env())
    try:
        run.until(lambda: (run_dir / "run_summary.json").exists(), poll=0.001)
        os.killpg(run.p.pid, signal.SIGKILL)  # the directory exists: the earliest moment it can say anything
    finally:
        run.end()
    s = _summary(run_dir)
    assert s["status"] == "starting" and s["process"]["pid"] == run.p.pid, s
    r = _train(run_dir, "algo.max_iterations=6")
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"pid {run.p.pid} on" in r.stderr and "was killed before it started" in r.stderr, r.stderr
    assert _summary(run_dir)["status"] == "completed"


@pytest.mark.slow
def test_every_process_killed_then_resume_says_so_and_removes_the_scratch(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(_env(), OMP_NUM_THREADS="1", TMPDIR=str(tmp))  # the ranks' scratch folders, counted here
    run_dir = tmp_path / "run"
    run = _Run(duorl_cmd(run_dir, *SHORT, *DP, "algo.save_interval=4"), env)
    try:
        run.until(lambda: len(_summary(run_dir).get("runtime_manifest", {}).get("ranks", [])) == 2
                  and (run_dir / "checkpoints" / "latest.json").exists(), poll=0.05)
        ranks = _summary(run_dir)["runtime_manifest"]["ranks"]
        pids = [r["collector_pid"] for r in ranks] + [r["learner_pid"] for r in ranks] + [run.p.pid]
        for pid in pids:  # every process, those that would record the death first
            os.kill(pid, signal.SIGKILL)
    finally:
        run.end()
    assert_all_gone(pids)
    assert _summary(run_dir)["status"] == "running"  # nobody was left to write the outcome
    left = [p.name for p in tmp.iterdir() if p.name.startswith("duorl-") and "-elastic-" not in p.name]
    assert len(left) == 1 and left[0].endswith("-rank1") and not left[0].startswith("duorl-duorl-"), left
    r = subprocess.run([sys.executable, "-m", "duorl", "resume", str(run_dir),
                        f"training.log_dir={tmp_path / 'resumed'}", "algo.max_iterations=10"],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "died without an outcome while 'running'" in r.stderr and f"removed {tmp / left[0]}" in r.stderr, r.stderr
    s = _summary(run_dir)
    assert s["status"] == "failed" and s["failed_part"] == "every process" and s["cause_known"] is False
    assert not [p for p in tmp.iterdir() if p.name.startswith("duorl-")]
    assert _summary(tmp_path / "resumed")["status"] == "completed"


@pytest.mark.slow
def test_a_double_ctrl_c_is_interrupted_and_leaves_nothing_running(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run = _Run(duorl_cmd(run_dir, *SHORT), _env())
    try:
        run.until(lambda: _summary(run_dir).get("status") == "running", poll=0.02)
        pids = [run.p.pid, _summary(run_dir)["runtime_manifest"]["collector_pid"]]
        os.killpg(run.p.pid, signal.SIGINT)  # Ctrl-C reaches the whole process group
        run.until(lambda: any("stopping at the next safe point" in x for x in run.lines), poll=0.001)
        os.killpg(run.p.pid, signal.SIGINT)
        code = run.p.wait(timeout=60)
    finally:
        run.end()
    assert code == 0, run.lines
    s = _summary(run_dir)
    assert s["status"] == "interrupted" and "error" not in s, s
    assert not [x for x in run.lines if "Traceback" in x or "died without a word" in x], run.lines
    assert_all_gone(pids)


@pytest.mark.slow
def test_resuming_a_stopped_run_is_refused(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run = _Run(duorl_cmd(run_dir, *SHORT, "algo.save_interval=4"), _env())
    try:
        run.until(lambda: (run_dir / "checkpoints" / "latest.json").exists(), poll=0.05)
        os.killpg(run.p.pid, signal.SIGSTOP)  # frozen, alive
        t0 = time.monotonic()
        r = _train(tmp_path / "second", f"training.resume={run_dir}", "algo.max_iterations=20", timeout=120)
        took = time.monotonic() - t0
    finally:
        run.end()
    assert r.returncode == 2, r.stderr[-2000:]
    line = r.stderr.strip().splitlines()
    assert len(line) == 1 and f"training.resume={run_dir}: the run there is still going (pid {run.p.pid}" in line[0]
    assert "Fix: " in line[0] and not (tmp_path / "second").exists() and took < 60


def test_an_abandoned_run_is_interrupted_by_a_second_ctrl_c_and_failed_by_anything_else() -> None:
    from duorl.cli.train_steps.finish import finish_abandoned

    class Directory:
        total_env_steps = 96

        def finish(self, status: str, iterations: int, env_steps: int, wall_s: float, **extra: object) -> None:
            self.got = (status, iterations, env_steps, extra)

    d = Directory()
    finish_abandoned(d, 12, 1.0, KeyboardInterrupt())
    assert d.got[:3] == ("interrupted", 12, 96) and "error" not in d.got[3]
    finish_abandoned(d, 12, 1.0, RuntimeError("a bug"))
    assert d.got[0] == "failed" and d.got[3]["error"] == "RuntimeError('a bug')"
