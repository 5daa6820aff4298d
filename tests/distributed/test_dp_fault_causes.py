"""Issue #39's data-parallel faults with real processes (CPU ranks over gloo, tiny pendulum runs,
OMP_NUM_THREADS=1, short process-group timeouts, hard timeouts on every wait, every PID checked gone):
an invalid device on one torchrun node is refused on every node in seconds (fault 1); the failing rank,
its part, pid, signal and phase reach rank 0's summary from another node (fault 2), which counts every
rank's env steps (fault 3); no /tmp/torchelastic_* tree is left (fault 6); a frozen learner is named
once, in one phase, within the stall bound (fault 8). Each process gets a private TMPDIR, so what a run
leaves in the temporary directory is its own."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.distributed.conftest import (alive, assert_all_gone, free_port, kill_group, launcher_cmd, run_pids,
                                        summary, torchrun_cmd, wait_for_ranks)
from tests.distributed.test_dp_faults import _descendants

LONG = ["algo.max_iterations=100000", "algo.save_interval=100000", "training.log_interval=1"]


def _start(cmd: list[str], tmp: Path) -> subprocess.Popen:
    from tests.distributed.conftest import dp_env

    tmp.mkdir(exist_ok=True)
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**dp_env(), "TMPDIR": str(tmp)}, start_new_session=True)


def _two_nodes(run_dir: Path, tmp: Path, node1_devices: str, *overrides: str) -> list[subprocess.Popen]:
    port = free_port()
    return [_start([a for a in torchrun_cmd(run_dir, *overrides, nproc=1, nnodes=2, node_rank=rank, port=port)
                    if a != "training.devices=[cpu,cpu]"] + [f"training.devices={devices}"], tmp)
            for rank, devices in ((0, "[cpu]"), (1, node1_devices))]


def _ends(procs: list[subprocess.Popen], t0: float, timeout: float) -> list[tuple[float, str]]:
    """(seconds from t0 to the exit, stderr) of each process, all within `timeout`."""
    ends: list[float | None] = [None] * len(procs)
    deadline = t0 + timeout
    while any(e is None for e in ends) and time.monotonic() < deadline:
        for i, p in enumerate(procs):
            if ends[i] is None and p.poll() is not None:
                ends[i] = time.monotonic() - t0
        time.sleep(0.05)
    out = []
    for p, end in zip(procs, ends):
        if end is None:
            kill_group(p)
        err = p.communicate(timeout=30)[1]
        assert end is not None, f"still running after {timeout} s:\n{err[-3000:]}"
        out.append((end, err))
    return out


def _elastic_trees(tmp: Path) -> list[str]:
    return sorted(p.name for p in tmp.glob("*") if p.name.startswith("torchelastic_") or "-elastic-" in p.name)


def _last_row_steps(run_dir: Path) -> int:
    return json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[-1])["env_steps"]


@pytest.mark.slow
def test_an_invalid_device_on_one_torchrun_node_is_refused_on_every_node_in_seconds(tmp_path):
    """Fault 1: node 1's `training.devices=[7]` (a CPU build) passed its roll call and died in
    init_process_group with a raw ValueError; node 0 waited dp_startup_timeout_s. Now node 1 refuses it
    before its roll call with plain `duorl train`'s message, and both nodes end with it, each rank exit 2."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("needs a machine without CUDA (the CPU build's case)")
    run_dir, tmp = tmp_path / "run", tmp_path / "tmp"
    t0 = time.monotonic()
    procs = _two_nodes(run_dir, tmp, "[7]", "algo.max_iterations=5")
    try:
        pids = [p.pid for p in procs] + [d for p in procs for d in _descendants(p.pid)]
        (end0, err0), (end1, err1) = _ends(procs, t0, 60)
        for p, err in zip(procs, (err0, err1)):
            assert "error: rank 1 (" in err and "training.devices=[7]: no CUDA device visible" in err, err[-3000:]
            assert "ValueError" not in err and "DistStoreError" not in err, err[-3000:]
            assert p.returncode != 0, err[-3000:]
        # torchrun's failure table names each rank's exit 2. The agent that hosts the rendezvous store
        # prints it; the other one may poll the store after that agent has ended and die in torch's own
        # RendezvousConnectionError first (a race of the two agents on a loaded machine), its rank's
        # refusal already printed above
        exits = [bool(re.search(r"exitcode\s*:\s*2", err)) for err in (err0, err1)]
        assert any(exits), err0[-3000:]
        for shown, err in zip(exits, (err0, err1)):
            assert shown or "RendezvousConnectionError" in err, err[-3000:]
        # the refusal reaches node 0 through the agents' store, not through a timeout
        assert abs(end0 - end1) < 5, (end0, end1)
        assert not run_dir.exists()
        assert_all_gone(pids)
    finally:
        for p in procs:
            kill_group(p)


@pytest.mark.slow
def test_a_torchrun_node_s_killed_collector_is_named_in_rank_0_s_summary(tmp_path):
    """Faults 2 and 3: node 0's summary kept `failed_part: "peer rank"`, `cause_known: false` and one
    rank's env steps. Now rank 1's record reaches it: rank, part, pid, signal, phase; every rank's steps."""
    run_dir, tmp = tmp_path / "run", tmp_path / "tmp"
    procs = _two_nodes(run_dir, tmp, "[cpu]", *LONG)
    try:
        s = wait_for_ranks(run_dir, procs[0], 3)
        pids = run_pids(s)
        victim = s["runtime_manifest"]["ranks"][1]["collector_pid"]
        os.kill(victim, signal.SIGKILL)
        t0 = time.monotonic()
        (_, err0), _ = _ends(procs, t0, 60)
        final = summary(run_dir)
        assert final["status"] == "failed" and final["failed_part"] == "collector", final
        assert final["failed_rank"] == 1 and final["failed_pid"] == victim and final["failed_signal"] == "SIGKILL"
        assert final["failed_phase"] and "cause_known" not in final, final
        assert final["error"].startswith("rank 1 (") and f"collector (pid {victim}) was killed by signal 9" in final["error"]
        assert final["env_steps"] == _last_row_steps(run_dir), final["env_steps"]
        # node 0's own output names the cause, then its rank's echo
        assert f"duorl: error: rank 1 (" in err0 and f"collector (pid {victim})" in err0, err0[-3000:]
        assert "rank 0 (" in err0 and "stopped because rank 1 failed" in err0, err0[-3000:]
        assert_all_gone(pids)
    finally:
        for p in procs:
            kill_group(p)


@pytest.mark.slow
def test_the_launcher_s_failed_run_counts_every_rank_s_steps_and_leaves_no_elastic_tree(tmp_path):
    """Faults 3 and 6 under the launcher: failing after 6 iterations the summary said half the metrics'
    env steps; every launcher run left a /tmp/torchelastic_* tree."""
    run_dir, tmp = tmp_path / "run", tmp_path / "tmp"
    proc = _start(launcher_cmd(run_dir, *LONG), tmp)
    try:
        s = wait_for_ranks(run_dir, proc, 6)
        assert not _elastic_trees(tmp) or all("-elastic-" in t for t in _elastic_trees(tmp)), _elastic_trees(tmp)
        os.kill(s["runtime_manifest"]["ranks"][1]["collector_pid"], signal.SIGKILL)
        _ends([proc], time.monotonic(), 60)
        final = summary(run_dir)
        assert final["failed_rank"] == 1 and final["failed_part"] == "collector", final
        assert final["env_steps"] == _last_row_steps(run_dir) and final["env_steps"] > 0, final["env_steps"]
        assert _elastic_trees(tmp) == []
        assert_all_gone(run_pids(s))
    finally:
        kill_group(proc)


@pytest.mark.slow
def test_clean_runs_leave_no_elastic_tree(tmp_path):
    """Fault 6: a clean launcher run and a clean pair of torchrun nodes leave nothing in the temporary
    directory (before: one empty /tmp/torchelastic_*/<run>/attempt_0/{0,1} per launcher run and per agent)."""
    tmp = tmp_path / "tmp"
    proc = _start(launcher_cmd(tmp_path / "launched", "algo.max_iterations=4"), tmp)
    try:
        _ends([proc], time.monotonic(), 180)
        assert proc.returncode == 0 and summary(tmp_path / "launched")["status"] == "completed"
        # (multiprocessing's pymp-* folders of processes that leave through os._exit are not counted here)
        assert _elastic_trees(tmp) == [] and not list(tmp.glob("duorl-*")), sorted(p.name for p in tmp.iterdir())
    finally:
        kill_group(proc)
    procs = _two_nodes(tmp_path / "torchrun", tmp, "[cpu]", "algo.max_iterations=4")
    try:
        _ends(procs, time.monotonic(), 180)
        assert [p.returncode for p in procs] == [0, 0]
        assert _elastic_trees(tmp) == [], _elastic_trees(tmp)
    finally:
        for p in procs:
            kill_group(p)


@pytest.mark.slow
def test_a_frozen_learner_is_named_once_in_one_phase_within_the_stall_bound(tmp_path):
    """Fault 8: a SIGSTOPped rank 1 learner was found after twice the stall bound, and messages put it in
    different phases beside "the collector waits for weights" (a deadlock's look). Now its collector says
    once that it stopped beating, in its last phase, and ends it at the bound, the phase the same throughout."""
    run_dir, tmp = tmp_path / "run", tmp_path / "tmp"
    bound = 8
    proc = _start(launcher_cmd(run_dir, *LONG, f"training.stall_timeout_s={bound}",
                               "training.stall_compile_timeout_s=60", "training.wait_report_s=3"), tmp)
    try:
        s = wait_for_ranks(run_dir, proc, 20)  # past the first iterations' compile phases
        victim = s["runtime_manifest"]["ranks"][1]["learner_pid"]
        os.kill(victim, signal.SIGSTOP)
        t0 = time.monotonic()
        ((elapsed, err),) = _ends([proc], t0, 120)
        final = summary(run_dir)
        assert final["failed_rank"] == 1 and final["failed_part"] == "learner" and final["failed_pid"] == victim, final
        m = re.search(r"made no progress for [\d.]+ s in phase '([^']+)' \(bound ([\d.]+) s: ([\w.]+)\)", final["error"])
        assert m, final["error"]
        phase, found_bound, key = m.group(1), float(m.group(2)), m.group(3)
        assert final["failed_phase"] == phase
        if key == "training.stall_timeout_s":  # the steady bound itself, not twice it
            assert found_bound == bound, final["error"]
        assert elapsed < found_bound + 8, (elapsed, final["error"])
        silent = [line for line in err.splitlines() if f"the learner (pid {victim}) stopped beating" in line]
        assert len(silent) <= 1 and all(f"in phase '{phase}'" in line for line in silent), silent
        assert not re.search(rf"the learner \(pid {victim}\) is in phase '(?!{re.escape(phase)}')", err), err[-3000:]
        waiting = [line for line in err.splitlines() if f"whose learner (pid {victim})" in line]
        assert len(waiting) <= 1 and not any("in phase" in line for line in waiting), waiting
        assert_all_gone(run_pids(s))
    finally:
        for pid in (s.get("runtime_manifest", {}).get("ranks", []) if "s" in locals() else []):
            if alive(pid["learner_pid"]):
                os.kill(pid["learner_pid"], signal.SIGKILL)
        kill_group(proc)
