"""The fault matrix as code (issue #21): one real `duorl train`, one process of its duo signalled in one
phase, and what the exit-code contract (docs/exit_codes.md) promises afterwards.

{learner, collector} x {SIGKILL, SIGTERM, SIGINT, SIGSTOP} x {building env, compiling or capturing,
steady state, writing a checkpoint}. A phase is held open for the test with debug.slow_phase (the
process stays in it, alive and beating, for SLOW_S), and the test signals when the peer's wait report
says the process is in it. Each case checks: the exit within 30 s (SIGSTOP: within the stall bound the
error names), the contract's exit code, the failing part named, no survivor (by PID), and every
checkpoint left intact and loadable into a fresh learner.

The runs are tiny CPU runs by default; the GPU script (benchmarks/scripts/fault_matrix.sh) sets
DUORL_FAULT_ARGS (the command line after `duorl train`) and the bounds through DUORL_FAULT_* variables.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from tests.conftest import TINY

TARGETS = ("learner", "collector")
SIGNALS = ("SIGKILL", "SIGTERM", "SIGINT", "SIGSTOP")
PHASES = ("building env", "compiling or capturing", "steady state", "writing a checkpoint")

STEADY_S = float(os.environ.get("DUORL_FAULT_STEADY_S", "3"))  # training.stall_timeout_s
# training.stall_compile_timeout_s: above a loaded CI machine's process start (spawn + imports)
LONG_S = float(os.environ.get("DUORL_FAULT_LONG_S", "20"))
SLOW_S = float(os.environ.get("DUORL_FAULT_SLOW_S", "6"))  # debug.slow_phase_s
EXIT_S = 30.0  # the contract: a signalled run ends within this
SHUTDOWN_S = 5.0  # the contract: every process is gone within this of the final summary
ORPHAN_S = 10.0  # the contract: a process whose parent died is gone within this
START_S = float(os.environ.get("DUORL_FAULT_START_S", "180"))  # until the phase is reached
DEFAULT_ARGS = ["--algo", "sac", "--task", "pendulum_swingup", "--sim", "mujoco", *TINY]


@dataclass(frozen=True)
class FaultCase:
    target: str
    sig: str
    phase: str

    @property
    def id(self) -> str:
        return f"{self.target}-{self.sig}-{self.phase.replace(' ', '_')}"

    def slow_phase(self) -> str | None:
        """The phase held open for the signal (process:phase), None for steady state."""
        if self.phase == "building env":
            return "collector:building env"  # the learner waits for it meanwhile
        if self.phase == "compiling or capturing":
            return f"{self.target}:compiling or capturing"
        if self.phase == "writing a checkpoint":
            return "learner:writing a checkpoint" if self.target == "learner" else "collector:writing its state"
        return None


ALL_CASES = [FaultCase(t, s, p) for t in TARGETS for s in SIGNALS for p in PHASES]


@dataclass
class Outcome:
    code: int
    elapsed_s: float  # from the signal to the exit
    stderr: str
    learner_pid: int
    collector_pid: int
    run_dir: Path
    gone_s: float = 0.0  # from the signal until neither process is left
    exit_after_summary_s: float | None = None  # from the last run_summary.json write to the exit


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purposes
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def assert_all_gone(pids: list[int], timeout: float = 10) -> None:
    """Every pid gone within `timeout` (a process that ends on its own, e.g. multiprocessing's resource
    tracker reading the end of its pipe once the last duorl process closed it, may outlive its parent by
    moments on a loaded machine); the survivors named."""
    deadline = time.monotonic() + timeout
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    survivors = [p for p in pids if alive(p)]
    assert not survivors, f"processes survived the run: {survivors}"


def _command(run_dir: Path, case: FaultCase) -> list[str]:
    args = shlex.split(os.environ["DUORL_FAULT_ARGS"]) if os.environ.get("DUORL_FAULT_ARGS") else DEFAULT_ARGS
    slow = case.slow_phase()
    return [
        sys.executable, "-m", "duorl", "train", *args,
        f"training.log_dir={run_dir}",
        # steady state: checkpoints far enough apart that a signal after one lands between them
        "algo.max_iterations=100000", f"algo.save_interval={10 if slow is None else 2}",
        f"training.stall_timeout_s={STEADY_S}", f"training.stall_compile_timeout_s={LONG_S}",
        "training.wait_report_s=0.5", "training.log_interval=1",
        *([f"debug.slow_phase='{slow}'", f"debug.slow_phase_s={SLOW_S}"] if slow else []),
    ]


def _marker(case: FaultCase) -> re.Pattern[str] | None:
    """The peer's wait report naming the held process in its held phase (both pids in it)."""
    slow = case.slow_phase()
    if slow is None:
        return None
    side, phase = slow.split(":")
    return re.compile(rf"so far \(pid (\d+)\): the {side} \(pid (\d+)\) is in phase '{re.escape(phase)}'")


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def _reach(case: FaultCase, proc: subprocess.Popen, run_dir: Path, err_path: Path) -> int:
    """Wait until the run is in the case's phase; returns the collector's pid."""
    deadline = time.monotonic() + START_S
    marker = _marker(case)
    latest = run_dir / "checkpoints" / "latest.json"
    # a checkpoint phase is taken the second time: an earlier checkpoint must exist to stay intact
    reports_before_first_checkpoint: int | None = None if case.phase == "writing a checkpoint" else 0
    first_pointer: str | None = None
    rows_at_change: int | None = None
    metrics = run_dir / "metrics.jsonl"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the run ended before the phase was reached:\n{_read(err_path)[-3000:]}")
        err = _read(err_path)
        if marker is None:
            # steady state: the iteration after a checkpoint was written, the furthest from the next one
            pointer = latest.read_text() if latest.exists() else None
            rows = len(metrics.read_text().splitlines()) if metrics.exists() else 0
            if first_pointer is None:
                first_pointer = pointer or ""
            elif rows_at_change is None and pointer is not None and pointer != first_pointer:
                rows_at_change = rows
            elif rows_at_change is not None and rows > rows_at_change:
                summary = json.loads((run_dir / "run_summary.json").read_text())
                return int(summary["runtime_manifest"]["collector_pid"])
            time.sleep(0.005)
            continue
        else:
            found = list(marker.finditer(err))
            if reports_before_first_checkpoint is None and latest.exists():
                reports_before_first_checkpoint = len(found)
            if reports_before_first_checkpoint is not None and len(found) > reports_before_first_checkpoint:
                reporter, held = int(found[-1].group(1)), int(found[-1].group(2))
                return held if (case.slow_phase() or "").startswith("collector") else reporter
        time.sleep(0.1)
    raise AssertionError(f"phase {case.phase!r} not reached within {START_S} s:\n{_read(err_path)[-3000:]}")


def run_case(case: FaultCase, tmp: Path) -> Outcome:
    run_dir = tmp / "run"
    out_path, err_path = tmp / "stdout.txt", tmp / "stderr.txt"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    with open(out_path, "w") as out, open(err_path, "w") as err:
        proc = subprocess.Popen(_command(run_dir, case), stdout=out, stderr=err, env=env, start_new_session=True)
    collector = -1
    try:
        collector = _reach(case, proc, run_dir, err_path)
        target = proc.pid if case.target == "learner" else collector
        t0 = time.monotonic()
        os.kill(target, getattr(signal, case.sig))
        if case.target == "collector" and case.sig == "SIGINT":
            # ignored by design (Ctrl-C reaches the whole group; the learner owns the stop): the run goes on
            time.sleep(1.5)
            assert alive(collector) and proc.poll() is None, "a collector stopped on SIGINT"
            os.kill(proc.pid, signal.SIGTERM)
        limit = EXIT_S + (LONG_S + SLOW_S + 15.0 if case.sig == "SIGSTOP" else 0.0)
        try:
            code = proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{case.id}: no exit within {limit} s:\n{_read(err_path)[-3000:]}") from None
        elapsed = time.monotonic() - t0
        exited_wall = time.time()
        deadline = time.monotonic() + 10
        while alive(collector) and time.monotonic() < deadline:
            time.sleep(0.05)
        summary = run_dir / "run_summary.json"
        after = exited_wall - summary.stat().st_mtime if summary.exists() else None
        return Outcome(code, elapsed, _read(err_path), proc.pid, collector, run_dir, time.monotonic() - t0, after)
    finally:
        for pid in (proc.pid, collector):
            if pid > 0 and alive(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        proc.wait(timeout=10)


def _stall_bound(stderr: str) -> tuple[float, float]:
    """(the heartbeat age when the stall was called, the bound it exceeded) from the error line."""
    m = re.search(r"made no progress for ([\d.]+) s in phase '[^']+' \(bound ([\d.]+) s", stderr)
    assert m, stderr[-3000:]
    return float(m.group(1)), float(m.group(2))


def check_outcome(case: FaultCase, o: Outcome) -> None:
    """What the contract promises for this case (docs/exit_codes.md)."""
    err = o.stderr
    assert "Traceback" not in err, err[-3000:]
    if case.target == "learner" and case.sig == "SIGKILL":
        assert o.code == -signal.SIGKILL, (o.code, err[-3000:])  # the exit status names it
        # the collector outlives it for a moment: the summary does not stay `running` (issue #31)
        summary = json.loads((o.run_dir / "run_summary.json").read_text())
        assert summary["status"] == "failed" and summary["failed_part"] == "learner", summary["status"]
        assert f"the learner (pid {o.learner_pid}) died without a word" in summary["error"], summary["error"]
    elif case.sig in ("SIGTERM", "SIGINT"):
        # the learner's SIGINT/SIGTERM, a collector's SIGTERM (passed to the learner as a stop request)
        # and a collector's SIGINT (ignored; the test then stops the learner) all end in a clean stop
        assert o.code == 0, (o.code, err[-3000:])
        summary = json.loads((o.run_dir / "run_summary.json").read_text())
        assert summary["status"] == "interrupted", summary["status"]
        # fast shutdown: the process is gone soon after its final summary (issue #31: 9-17 s before)
        assert o.exit_after_summary_s is not None and o.exit_after_summary_s <= SHUTDOWN_S, o.exit_after_summary_s
        if case.target == "learner" and case.phase == "compiling or capturing":
            # a compile can outlast the 30 s: the learner abandons it rather than waiting for its end
            assert f"{case.sig} while the learner was compiling or capturing: stopped at once" in err, err[-3000:]
    elif case.target == "learner" and case.sig == "SIGSTOP":
        # frozen: its collector names it and ends it (SIGKILL is all a stopped process obeys)
        assert o.code == -signal.SIGKILL, (o.code, err[-3000:])
        assert f"the learner (pid {o.learner_pid}) made no progress" in err, err[-3000:]
        summary = json.loads((o.run_dir / "run_summary.json").read_text())  # written by the collector
        assert summary["failed_part"] == "learner" and str(o.learner_pid) in summary["error"], summary
        if case.phase in ("compiling or capturing", "writing a checkpoint"):
            assert f"in phase '{case.slow_phase().split(':')[1]}'" in err, err[-3000:]
    elif case.target == "collector" and case.sig == "SIGKILL":
        assert o.code == 1, (o.code, err[-3000:])
        assert f"collector (pid {o.collector_pid}) was killed by signal 9" in err, err[-3000:]
    else:  # collector SIGSTOP
        assert o.code == 1, (o.code, err[-3000:])
        assert f"the collector (pid {o.collector_pid}) made no progress" in err, err[-3000:]
        if case.phase != "steady state":
            assert f"in phase '{case.slow_phase().split(':')[1]}'" in err, err[-3000:]
    if case.sig == "SIGSTOP":
        age, bound = _stall_bound(err)
        assert age >= bound >= min(STEADY_S, LONG_S), (age, bound)  # never called before its bound
        # the peer noticed within the bound (plus a held phase the peer had to finish first); a peer
        # still building its env (a long phase, bounded by the long bound) must finish that first:
        # mjwarp's build takes tens of seconds on a loaded GPU host
        own_work = LONG_S if case.phase == "building env" else 15.0
        assert o.elapsed_s <= bound + SLOW_S + own_work, (o.elapsed_s, bound)
    else:
        assert o.elapsed_s <= EXIT_S, o.elapsed_s
    assert not alive(o.learner_pid) and not alive(o.collector_pid), "a process outlived the run"
    # a killed learner takes its collector along at once (no orphan)
    assert o.gone_s <= o.elapsed_s + ORPHAN_S, (o.gone_s, o.elapsed_s)
    if case.sig != "SIGKILL" or case.target != "learner":
        summary = json.loads((o.run_dir / "run_summary.json").read_text())
        assert summary["status"] in ("interrupted", "failed"), summary["status"]
    check_checkpoints(o.run_dir)


def check_checkpoints(run_dir: Path) -> None:
    """Every checkpoint left is intact and loads into a fresh learner; the summary is as far as them."""
    from duorl.algos.registry import make_learner
    from duorl.cli.configure import config_from_dict
    from duorl.envs.registry import env_spec
    from duorl.runtime.checkpoint import latest_checkpoint, load_checkpoint

    folder = run_dir / "checkpoints"
    # the run's checkpoints (a collector's .collector_*.pt state is an input to one, not a checkpoint)
    files = sorted(p for p in folder.glob("*.pt") if not p.name.startswith(".")) if folder.is_dir() else []
    # a write cut short leaves only its temp file (.iter_*.pt.tmp-PID), which nothing reads
    if not files:
        return
    cfg = config_from_dict(json.loads((run_dir / "run_config.json").read_text()))
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    for path in files:
        data = load_checkpoint(path)
        learner = make_learner(cfg.algo, env_spec(cfg.task), device, 0)
        learner.load_state_dict(data["learner"])
    latest = load_checkpoint(latest_checkpoint(run_dir))
    summary = json.loads((run_dir / "run_summary.json").read_text())
    # crash-visible state: a run killed at any point says at least how far its last checkpoint got
    assert summary["iterations"] >= latest["header"]["iteration"], (summary["iterations"], latest["header"])
    assert summary["last_checkpoint"] is not None
