"""A run directory says what became of its run (issue #39 faults 4 and 5): its summary exists from the
claim on, names the process that writes it, and a later `duorl train` or resume in that directory tells
a live run, a dead one (its outcome never written) and an ended one apart. Real processes: each run
here is a Python process that claims a directory and is killed (kill -9) or stopped (SIGSTOP) once the
file it writes exists."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from duorl.config.errors import ConfigError
from duorl.runtime.process_record import is_alive, this_process
from duorl.telemetry.earlier_run import KILLED_PART, earlier_run, run_dir_of
from duorl.telemetry.run_dir_claim import check_new_run_dir, claim_run_dir

ROOT = Path(__file__).resolve().parents[2]
# a run's first seconds: claim the directory (its first summary), then whatever comes, here a wait
CLAIMER = ("import sys, time\nfrom pathlib import Path\nfrom duorl.telemetry.run_dir_claim import claim_run_dir\n"
           "claim_run_dir(sys.argv[1], Path('unused'))\nPath(sys.argv[1], 'run_config.json').write_text('{}')\n"
           "time.sleep(120)")


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT / "src"))


def _until(cond, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def _start_claiming(run: Path) -> subprocess.Popen:
    """A process that claims `run`, returned once its first summary is there (polled, not slept on)."""
    p = subprocess.Popen([sys.executable, "-c", CLAIMER, str(run)], env=_env(), stderr=subprocess.PIPE, text=True)
    _until(lambda: (run / "run_config.json").exists(), p)
    return p


def _killed(run: Path) -> int:
    p = _start_claiming(run)
    p.kill()
    p.wait(timeout=10)
    return p.pid


def _summary(run: Path) -> dict:
    return json.loads((run / "run_summary.json").read_text())


def test_the_claim_writes_a_starting_summary_at_once(tmp_path: Path) -> None:
    run = claim_run_dir(str(tmp_path / "run"), Path("unused"))
    s = _summary(run)
    assert s["status"] == "starting" and s["process"]["pid"] == os.getpid() and "started_at" in s
    assert is_alive(s["process"]) is True


def test_a_run_killed_before_it_started_leaves_a_directory_that_is_reused(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    pid = _killed(run)
    s = _summary(run)
    assert s["status"] == "starting" and s["process"]["pid"] == pid  # recognisable: it never started, and who
    found = earlier_run(run)
    assert found is not None and found.dead and found.never_started
    check_new_run_dir(run)  # not refused
    assert claim_run_dir(str(run), Path("unused")) == run
    err = capsys.readouterr().err
    assert f"pid {pid} on" in err and "killed before it started" in err and "reusing the directory" in err, err
    assert sorted(p.name for p in run.iterdir()) == ["run_summary.json"]  # the dead run's files are gone
    assert _summary(run)["process"]["pid"] == os.getpid()


def test_a_run_still_starting_or_stopped_is_neither_reused_nor_resumed(tmp_path: Path) -> None:
    from duorl.cli.resume import check_resumed_run

    run = tmp_path / "run"
    p = _start_claiming(run)
    try:
        os.kill(p.pid, signal.SIGSTOP)  # stopped is alive
        with pytest.raises(ConfigError, match=f"still going \\(pid {p.pid} on .*status 'starting'.*SIGSTOP"):
            check_new_run_dir(run)
        with pytest.raises(ConfigError, match=f"training.resume={run}: the run there is still going .*kill -CONT {p.pid}"):
            check_resumed_run(str(run))
        assert _summary(run)["status"] == "starting"  # nothing recorded over a live run
    finally:
        p.kill()
        os.kill(p.pid, signal.SIGCONT)
        p.wait(timeout=10)


def _dead_running_run(tmp_path: Path) -> Path:
    """A run killed with every process while running: its summary says running, at a checkpoint."""
    run = tmp_path / "run"
    _killed(run)
    s = _summary(run)
    s.update(status="running", iterations=5, last_checkpoint="checkpoints/iter_000005.pt")
    (run / "run_summary.json").write_text(json.dumps(s))
    (run / "checkpoints").mkdir()
    (run / "checkpoints" / "latest.json").write_text('{"latest": "iter_000005.pt"}')
    return run


def test_a_run_found_dead_while_running_is_said_and_recorded(tmp_path: Path) -> None:
    run = _dead_running_run(tmp_path)
    with pytest.raises(ConfigError, match="died without an outcome while 'running' \\(iteration 5, last checkpoint "
                                          f"checkpoints/iter_000005.pt\\).*duorl resume {run}"):
        check_new_run_dir(run)  # never reused: it has checkpoints
    s = _summary(run)
    assert s["status"] == "failed" and s["failed_part"] == KILLED_PART and s["cause_known"] is False
    assert "killed at once" in s["error"] and s["found_dead"]["by"].startswith("duorl train")


def test_resuming_a_dead_run_says_so_and_records_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from duorl.cli.resume import check_resumed_run

    run = _dead_running_run(tmp_path)
    for path in (run, run / "checkpoints"):
        assert run_dir_of(path) == run
    check_resumed_run(str(run))
    err = capsys.readouterr().err
    assert "duorl: note: the run in" in err and "recorded in its run_summary.json" in err, err
    assert _summary(run)["status"] == "failed"
    check_resumed_run(str(run))  # once recorded, a failed run: resumed without a word
    assert "note" not in capsys.readouterr().err


def test_two_runs_taking_over_one_dead_start_never_both_win(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _killed(run)
    code = ("import sys\nfrom pathlib import Path\nfrom duorl.telemetry.run_dir_claim import claim_run_dir\n"
            "try:\n    claim_run_dir(sys.argv[1], Path('unused'))\nexcept Exception as e:\n    print(e); sys.exit(2)\n"
            "sys.stdin.read()")  # the winner lives on (a run going) until the test has seen the others lose
    racers = [subprocess.Popen([sys.executable, "-c", code, str(run)], env=_env(), stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    try:
        deadline = time.monotonic() + 60
        while sum(r.poll() == 2 for r in racers) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        for r in racers:
            r.stdin.close()  # type: ignore[union-attr]
        codes = [r.wait(timeout=60) for r in racers]
    finally:
        for r in racers:
            r.kill()
    assert codes.count(0) == 1 and codes.count(2) == 2, codes
    assert _summary(run)["process"]["pid"] == next(r.pid for r, c in zip(racers, codes) if c == 0)


def test_a_reused_pid_or_another_host_is_not_taken_for_the_run() -> None:
    me = this_process()
    assert is_alive(me) is True
    assert is_alive(dict(me, start_ticks=(me["start_ticks"] or 0) + 1)) is False  # the pid is another process's now
    assert is_alive(dict(me, boot_id="another-boot")) is False
    assert is_alive(dict(me, host="elsewhere")) is None and is_alive(None) is None


def test_dead_runs_scratch_folders_go_and_live_ones_stay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tempfile

    from duorl.distributed.rank_scratch import rank_scratch_dir, remove_dead_rank_scratch

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert rank_scratch_dir("duorl-0a1b", 1, 42).name == "duorl-0a1b-42-rank1"  # one duorl- prefix
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    dead = [rank_scratch_dir("duorl-0a1b", 1, gone.pid), tmp_path / f"duorl-duorl-0a1b-{gone.pid}-rank2"]
    live = [rank_scratch_dir("0a1b", 1, os.getpid()), tmp_path / f"duorl-other-{gone.pid}"]  # not a rank's folder
    for d in dead + live:
        d.mkdir()
        (d / "snapshot.pt").write_bytes(b"x")
    assert sorted(remove_dead_rank_scratch()) == sorted(dead)
    assert all(d.exists() for d in live) and not any(d.exists() for d in dead)
