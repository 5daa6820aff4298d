"""Faults in a data-parallel run (two CPU ranks through the launcher): any rank's learner or collector
dying ends the whole run within 30 s, non-zero, naming the rank and the part; SIGINT to the launcher
stops every rank at one boundary with a final checkpoint and exit 0. No process of any rank survives."""

from __future__ import annotations

import os
import signal
import time

import pytest

from duorl.runtime.checkpoint import latest_checkpoint, load_checkpoint
from tests.distributed.conftest import assert_all_gone, kill_group, launcher_cmd, run_pids, start, summary, wait_for_ranks

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
