"""Faults in a data-parallel run (two CPU ranks through the launcher): any rank's learner or collector
dying ends the whole run within 30 s, non-zero, naming the rank and the part; SIGINT to the launcher
stops every rank at one boundary with a final checkpoint and exit 0. No process of any rank survives."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time

import pytest

from duorl.runtime.checkpoint import latest_checkpoint, load_checkpoint
from tests.distributed.conftest import (assert_all_gone, free_port, kill_group, launcher_cmd, run_pids, start, summary,
                                        torchrun_cmd, wait_for_ranks)

LONG = ["algo.max_iterations=100000", "algo.save_interval=100000", "training.log_interval=1"]


def _fault(tmp_path, name: str):
    run_dir = tmp_path / name
    proc = start(launcher_cmd(run_dir, *LONG))
    s = wait_for_ranks(run_dir, proc, 3)
    return run_dir, proc, s


@pytest.mark.slow
@pytest.mark.parametrize("part", ["collector", "learner"])
def test_killing_rank_1s_part_ends_the_run_naming_it(tmp_path, part):
    run_dir, proc, s = _fault(tmp_path, part)
    try:
        rank1 = s["runtime_manifest"]["ranks"][1]
        victim = rank1[f"{part}_pid"]
        os.kill(victim, signal.SIGKILL)
        t0 = time.monotonic()
        _, err = proc.communicate(timeout=30)
        assert time.monotonic() - t0 < 30
        assert proc.returncode == 1, err[-3000:]
        assert "the data-parallel run failed" in err and "rank 1" in err, err[-3000:]
        summary_lines = err.split("the data-parallel run failed:", 1)[1]
        if part == "collector":
            assert "rank 1 (" in summary_lines and f"collector (pid {victim}) was killed by signal 9" in summary_lines
        else:
            assert f"the learner (pid {victim}) was killed by signal SIGKILL" in summary_lines, err[-3000:]
        # rank 0 is named only as stopped because of rank 1, never as a failure of its own
        assert "rank 0 stopped because another rank failed" in summary_lines or "rank 0" not in summary_lines, err[-3000:]
        assert_all_gone(run_pids(s))
    finally:
        kill_group(proc)


@pytest.mark.slow
def test_sigint_to_the_launcher_stops_every_rank_with_a_final_checkpoint(tmp_path):
    run_dir, proc, s = _fault(tmp_path, "sigint")
    try:
        proc.send_signal(signal.SIGINT)
        t0 = time.monotonic()
        _, err = proc.communicate(timeout=30)
        assert time.monotonic() - t0 < 30
        assert proc.returncode == 0, err[-3000:]
        final = summary(run_dir)
        assert final["status"] == "interrupted" and final["iterations"] >= 3, final.get("error")
        assert final["dp_learner_state"]["equal"]
        ckpt = load_checkpoint(latest_checkpoint(run_dir))
        assert ckpt["header"]["iteration"] == final["iterations"] and ckpt["runtime"]["world_size"] == 2
        assert all(r["collector"] is not None for r in ckpt["runtime"]["ranks"])
        assert_all_gone(run_pids(s))
    finally:
        kill_group(proc)


# ---------------------------------------------------------------------------------------------------
# issue #31: the launcher or an agent killed, a rank frozen, a refusal before joining, early stops

FULL = os.environ.get("DUORL_FAULT_MATRIX") == "1"
full_matrix = pytest.mark.skipif(not FULL, reason="the full fault matrix: DUORL_FAULT_MATRIX=1 (benchmarks/scripts/fault_matrix.sh)")
ORPHAN_S = 10.0  # every process gone within this of its launcher's death
SHUTDOWN_S = 5.0  # every process gone within this of the final summary


def _scratch_of(starter_pid: int) -> list[str]:
    """The rank scratch folders of the ranks `starter_pid` (a launcher, an agent) started."""
    import tempfile
    from pathlib import Path

    return [p.name for p in Path(tempfile.gettempdir()).glob(f"duorl-*-{starter_pid}-rank*")]


def _descendants(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout.split()
    kids = [int(x) for x in out]
    return kids + [k for c in kids for k in _descendants(c)]


@pytest.mark.slow
def test_killing_the_launcher_ends_every_rank_and_the_summary_says_failed(tmp_path):
    """Issue #31: `kill -9` of the top process left six processes training unattended for 5 minutes,
    then `completed`. Now every rank's learner and collector die with it, and the summary says failed."""
    run_dir = tmp_path / "launcher"
    proc = start(launcher_cmd(run_dir, "algo.max_iterations=100000", "algo.save_interval=2", "training.log_interval=1"))
    wait_for_ranks(run_dir, proc, 3)
    try:
        pids = _descendants(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)
        t0 = time.monotonic()
        proc.communicate(timeout=30)
        assert_all_gone(pids, timeout=ORPHAN_S)
        assert time.monotonic() - t0 <= ORPHAN_S
        final = summary(run_dir)
        assert final["status"] == "failed" and final["failed_part"] == "learner", final["status"]
        assert "killed from outside" in final["error"], final["error"]
        assert not _scratch_of(proc.pid), "a rank's scratch folder outlived the run"
        load_checkpoint(latest_checkpoint(run_dir))
    finally:
        kill_group(proc)


@pytest.mark.slow
def test_a_killed_rank_0_learner_is_the_summary_s_root_cause(tmp_path):
    """Issue #31: after `kill -9` of rank 0's learner the summary stayed `running`; after a peer's
    failure it held rank 0's secondary gloo message. The launcher records the root cause."""
    run_dir, proc, s = _fault(tmp_path, "rank0")
    try:
        victim = s["runtime_manifest"]["ranks"][0]["learner_pid"]
        os.kill(victim, signal.SIGKILL)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 1, err[-3000:]
        final = summary(run_dir)
        assert final["status"] == "failed" and final["failed_part"] == "learner", final
        assert final["error"].startswith(f"rank 0 (") and f"learner (pid {victim}) was killed by signal SIGKILL" in final["error"]
        assert "GLHF" not in err and "rank 1 (vm): rank 1" not in err, err[-3000:]
        assert_all_gone(run_pids(s))
    finally:
        kill_group(proc)


@pytest.mark.slow
def test_a_clean_stop_ends_within_seconds_of_the_summary_without_the_launcher_s_sigkill(tmp_path):
    """Issue #31: 9-17 s between the last summary and the exit, more than the launcher's grace, which
    then SIGKILLed rank 0 and still said "every rank stopped cleanly"."""
    run_dir, proc, s = _fault(tmp_path, "sigterm")
    try:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        exited = time.time()
        assert proc.returncode == 0, err[-3000:]
        assert "every rank stopped cleanly (interrupted)" in err and "had to kill" not in err, err[-3000:]
        assert exited - (run_dir / "run_summary.json").stat().st_mtime <= SHUTDOWN_S
        assert_all_gone(run_pids(s))
    finally:
        kill_group(proc)


@pytest.mark.slow
@pytest.mark.parametrize("sig,delay_s", [(signal.SIGINT, 0.3), (signal.SIGTERM, 3.0), (signal.SIGINT, 6.0)])
def test_a_stop_during_the_data_parallel_start_up_is_clean(tmp_path, sig, delay_s):
    """Issue #31: Ctrl-C during start-up ended as a failure (a collector without handlers yet), or was
    recorded and ignored. Now: exit 0, `interrupted` or stopped before the run started (no directory)."""
    run_dir = tmp_path / "run"
    proc = start(launcher_cmd(run_dir, *LONG))
    try:
        time.sleep(delay_s)
        os.kill(proc.pid, sig)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err[-3000:]
        assert "Traceback" not in err, err[-3000:]
        if (run_dir / "run_summary.json").exists():
            assert summary(run_dir)["status"] == "interrupted", err[-3000:]
        else:
            assert "stopped before the run started" in err and not run_dir.exists(), err[-3000:]
        assert not _descendants(proc.pid)
    finally:
        kill_group(proc)


@full_matrix
@pytest.mark.slow
def test_a_frozen_rank_is_blamed_and_its_waiting_peer_says_so(tmp_path):
    """Issue #31: with rank 1's learner stopped, rank 0's learner stopped beating in the all-reduce and
    both collectors fired; the launcher listed rank 0 first. Now rank 0 says whom it waits for and only
    rank 1 is named as the cause. Rank 1, frozen at its 3rd iteration, had never published its heartbeat
    (the first came a second after the start, later than that) and rank 0 named nobody: published at once
    now. A waiting rank names a peer whose heartbeat is over 3 s old (distributed/collective_wait.py):
    with a stall bound of 3 s too, the frozen rank's collector ends it about when it would be named; at 6 s
    rank 0's report at 4 s comes in between."""
    run_dir = tmp_path / "frozen"
    proc = start(launcher_cmd(run_dir, *LONG, "training.stall_timeout_s=6", "training.stall_compile_timeout_s=20",
                              "training.wait_report_s=2"))
    s = wait_for_ranks(run_dir, proc, 3)
    try:
        victim = s["runtime_manifest"]["ranks"][1]["learner_pid"]
        os.kill(victim, signal.SIGSTOP)
        _, err = proc.communicate(timeout=90)
        assert proc.returncode == 1, err[-3000:]
        root = err.split("the data-parallel run failed:", 1)[1].strip().splitlines()
        assert root[0].startswith("rank 1 (") and f"the learner (pid {victim}) made no progress" in root[0], err[-3000:]
        assert "(rank 0 stopped because another rank failed)" in root, err[-3000:]
        assert re.search(rf"rank 0 \(.*\): the learner \(pid \d+\) is waiting for rank 1 \(.*\), whose learner \(pid {victim}\)", err), err[-3000:]
        final = summary(run_dir)
        assert final["status"] == "failed" and final["failed_part"] == "learner" and str(victim) in final["error"], final
        assert_all_gone(run_pids(s))
    finally:
        kill_group(proc)


def _two_nodes(run_dir, node1_devices: str = "[cpu]", *overrides: str):
    port = free_port()

    def node(rank: int, devices: str):
        cmd = [a for a in torchrun_cmd(run_dir, *overrides, nproc=1, nnodes=2, node_rank=rank, port=port)
               if a != "training.devices=[cpu,cpu]"]
        return start(cmd + [f"training.devices={devices}"])

    return node(0, "[cpu]"), node(1, node1_devices)


@full_matrix
@pytest.mark.slow
def test_a_rank_refusing_before_it_joins_ends_every_node(tmp_path):
    """Issue #31: node 1 refused its training.devices; node 0 waited silently for 30 minutes. Now every
    node ends within 30 s with node 1's message, each rank exiting 2, and no run directory."""
    run_dir = tmp_path / "run"
    n0, n1 = _two_nodes(run_dir, "[cpu,cpu]", "algo.max_iterations=5")
    try:
        t0 = time.monotonic()
        outs = [p.communicate(timeout=60)[1] for p in (n0, n1)]
        assert time.monotonic() - t0 <= 30
        for err in outs:
            assert "error: rank 1 (" in err and "training.devices=[cpu,cpu]: lists 2 device(s)" in err, err[-3000:]
            # each rank exits 2 (torchrun itself reports any failed worker with its own exit code 1)
            assert re.search(r"exitcode\s*:\s*2", err), err[-3000:]
        assert not run_dir.exists()
    finally:
        kill_group(n0)
        kill_group(n1)


@full_matrix
@pytest.mark.slow
def test_killing_one_torchrun_agent_ends_every_node(tmp_path):
    """Issue #31: one node's agent killed left its rank training until the end; the other agent exited
    after 522 s. Now its rank dies with it and the other node's rank loses its peer at once."""
    run_dir = tmp_path / "run"
    n0, n1 = _two_nodes(run_dir, "[cpu]", "algo.max_iterations=100000", "training.log_interval=1")
    try:
        s = wait_for_ranks(run_dir, n0, 3)
        pids = run_pids(s) + _descendants(n0.pid) + _descendants(n1.pid)
        os.kill(n1.pid, signal.SIGKILL)
        t0 = time.monotonic()
        assert_all_gone(pids, timeout=30)
        n0.communicate(timeout=30)
        assert time.monotonic() - t0 <= 30
        final = summary(run_dir)
        assert final["status"] == "failed" and "lost a peer rank" in final["error"] and "GLHF" not in final["error"]
        assert not _scratch_of(n1.pid), "the killed node's scratch folder outlived the run"
    finally:
        kill_group(n0)
        kill_group(n1)
