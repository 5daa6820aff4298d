"""The fault matrix (tests/runtime/faults.py) with real processes. `make test` runs a representative
subset; the whole matrix runs with DUORL_FAULT_MATRIX=1 (benchmarks/scripts/fault_matrix.sh, also on a GPU)."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import TINY
from tests.runtime.faults import (ALL_CASES, ORPHAN_S, FaultCase, alive, assert_all_gone, check_checkpoints, check_outcome,
                                  run_case)

# the acceptance case (a stopped collector is named within the stall bound), its mirror (a frozen
# learner is noticed by its collector), a kill in a held checkpoint phase, a clean stop before training,
# a stop that abandons the learner's compile (the H200 matrix found a compile outlasting the 30 s), and
# a learner killed outright
DEFAULT = {
    FaultCase("collector", "SIGSTOP", "steady state"),
    FaultCase("learner", "SIGSTOP", "steady state"),
    FaultCase("collector", "SIGKILL", "writing a checkpoint"),
    FaultCase("learner", "SIGTERM", "building env"),
    FaultCase("learner", "SIGTERM", "compiling or capturing"),
    # a learner killed outright: its collector records the run failed and leaves (issue #31)
    FaultCase("learner", "SIGKILL", "steady state"),
}
FULL = os.environ.get("DUORL_FAULT_MATRIX") == "1"


@pytest.mark.slow
@pytest.mark.parametrize("case", ALL_CASES, ids=[c.id for c in ALL_CASES])
def test_fault(case: FaultCase, tmp_path) -> None:
    if case not in DEFAULT and not FULL:
        pytest.skip("the full fault matrix: DUORL_FAULT_MATRIX=1 (benchmarks/scripts/fault_matrix.sh)")
    check_outcome(case, run_case(case, tmp_path))


# ---------------------------------------------------------------------------------------------------
# issue #31: orphans, clean stops at any moment, a full disk, the CLI without torch

QUICK = ["--algo", "sac", "--task", "pendulum_swingup", "--sim", "mujoco", *TINY]


def _children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout.split()
    return [int(x) for x in out]


def _spawned_collector(proc: subprocess.Popen, timeout: float = 120) -> int:
    """The collector's pid, as soon as the learner spawned it (before it ran any of duorl's code)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        for pid in _children(proc.pid):
            try:
                if "spawn_main" in Path(f"/proc/{pid}/cmdline").read_text(errors="replace"):
                    return pid
            except FileNotFoundError:
                pass
        time.sleep(0.005)
    raise AssertionError("the learner spawned no collector")


@pytest.mark.slow
@pytest.mark.parametrize("delay_s", [0.0, 1.0])
def test_a_learner_killed_right_after_spawning_its_collector_takes_it_along(delay_s, tmp_path) -> None:
    """Issue #31: a SIGKILL 1-4 s after the spawn left the collector running as an orphan (10 GB)."""
    cmd = [sys.executable, "-m", "duorl", "train", *QUICK, f"training.log_dir={tmp_path / 'run'}",
           "algo.max_iterations=100000"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    children: list[int] = []
    try:
        _spawned_collector(proc)
        children = _children(proc.pid)  # the collector and multiprocessing's resource tracker
        time.sleep(delay_s)
        os.kill(proc.pid, signal.SIGKILL)
        t0 = time.monotonic()
        proc.wait(timeout=10)
        assert_all_gone(children, ORPHAN_S)  # no child outlives its learner
        assert time.monotonic() - t0 <= ORPHAN_S
    finally:
        for pid in children:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=10)


@pytest.mark.slow
@pytest.mark.parametrize("delay_s", [0.05, 0.5, 3.0])
def test_a_stop_at_any_moment_is_clean(delay_s, tmp_path) -> None:
    """A SIGINT from the first instruction on: exit 0, no traceback, and either `interrupted` or "stopped
    before the run started" with no run directory; nothing left running."""
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "duorl", "train", *QUICK, f"training.log_dir={run_dir}", "algo.max_iterations=100000"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        time.sleep(delay_s)
        children = _children(proc.pid)
        os.kill(proc.pid, signal.SIGINT)
        t0 = time.monotonic()
        _, err = proc.communicate(timeout=60)
        assert time.monotonic() - t0 <= 30.0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=10)
    assert proc.returncode == 0, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    if "stopped before the run started" in err:
        assert not run_dir.exists()
    else:
        assert json.loads((run_dir / "run_summary.json").read_text())["status"] == "interrupted", err[-3000:]
        check_checkpoints(run_dir)
    assert_all_gone(children + _children(proc.pid))


@pytest.mark.parametrize("args", [["--help"], ["train", "--help"], ["train", "algo.no_such_key=1"],
                                  ["train", "--task", "no_such_task"]])
def test_help_and_refusals_do_not_import_torch(args) -> None:
    """`duorl --help` and a refused config answer without importing torch (about 1 s saved; under 1 s
    on a quiet machine)."""
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "duorl", *args], capture_output=True, text=True,
                       timeout=60)
    wall = time.monotonic() - t0
    assert r.returncode == (0 if "--help" in args else 2), r.stderr[-2000:]
    imported = [line.rsplit("|", 1)[-1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")]
    assert "torch" not in imported, [m for m in imported if m.startswith("torch")][:5]
    assert wall < 5.0, wall  # generous on a loaded 2-core box; the torch check is the real one


def test_a_failed_write_names_the_file_and_the_cause_and_leaves_no_temp(tmp_path, monkeypatch) -> None:
    """Any atomic write that fails (ENOSPC injected after 100 bytes), torch.save's included (its own
    error hides the cause): WriteFailed in words, the temp file removed, the previous file intact."""
    import builtins

    import torch

    import duorl.runtime.atomic_files as atomic_files
    from duorl.runtime.atomic_files import WriteFailed, atomic_write

    target = tmp_path / "iter_000010.pt"
    atomic_write(target, b"previous", "checkpoint")

    class FillsUp:
        def __init__(self, f):
            self.f, self.n = f, 0

        def write(self, data):
            self.n += len(data)
            if self.n > 100:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return self.f.write(data)

        def __getattr__(self, name):
            return getattr(self.f, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

    monkeypatch.setattr(atomic_files, "open", lambda *a, **k: FillsUp(builtins.open(*a, **k)), raising=False)
    for content in (b"x" * 1000, lambda f: torch.save({"x": torch.zeros(1000)}, f)):
        with pytest.raises(WriteFailed, match=r"writing checkpoint .*iter_000010.pt failed: no space left on device"):
            atomic_write(target, content, "checkpoint")
        assert target.read_bytes() == b"previous"
        assert [p.name for p in tmp_path.iterdir()] == ["iter_000010.pt"]


@pytest.fixture
def full_disk(tmp_path):
    """A 1.5 MB tmpfs (root only): a checkpoint of a few hundred kB fits once, not twice."""
    mount = tmp_path / "full"
    mount.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a size-limited tmpfs needs root")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1500k", "tmpfs", str(mount)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


@pytest.mark.slow
def test_a_full_disk_is_a_named_failure_with_the_last_checkpoint_intact(full_disk, tmp_path) -> None:
    """Issue #31: an 864 KB temp file left on the full disk, ~110 lines of traceback, the summary never
    updated. Now: one line naming the checkpoint and the cause, exit 1, no temp file, the previous
    checkpoint the latest and loadable, the summary `failed` with the part named."""
    run_dir = full_disk / "run"
    cmd = [sys.executable, "-m", "duorl", "train", *QUICK, f"training.log_dir={run_dir}", "algo.max_iterations=100000",
           "algo.save_interval=5", "algo.actor_hidden_dims=[64,64]", "algo.critic_hidden_dims=[128,128]"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 1, r.stderr[-3000:]
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    assert re.search(r"duorl: error: writing checkpoint \S+iter_\d+\.pt failed: no space left on device", r.stderr), r.stderr
    assert not list(run_dir.rglob("*.tmp-*")), list(run_dir.rglob("*"))
    summary = json.loads((run_dir / "run_summary.json").read_text())
    assert summary["status"] == "failed" and summary["failed_part"] == "run directory", summary
    assert "no space left on device" in summary["error"]
    check_checkpoints(run_dir)
