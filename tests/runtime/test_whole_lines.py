"""Each line a duorl process prints is one write (runtime/whole_lines.py, issue #39 fault 7): under
PYTHONUNBUFFERED=1 a print was two (the text, then its newline), and another process's line landed
between them. Real processes: a child of this one (the path of every collector and rank) and the
`duorl` command; the write calls are counted by strace where the machine has it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHILD_REPORTS = ("import sys, duorl\n"
                 "from duorl.runtime.heartbeat import _to_stderr\n"
                 "for i in range(20): _to_stderr(f'duorl: the collector waits for weights > {i}')\n"
                 "print(sys.stderr.line_buffering, sys.stderr.write_through, sys.stdout.line_buffering)")


def _env(**extra: str) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT / "src"), PYTHONUNBUFFERED="1", **extra)


def test_a_child_process_writes_whole_lines() -> None:
    # named as its parent's child, as a learner starts its collector (runtime/orphans.py)
    r = subprocess.run([sys.executable, "-c", CHILD_REPORTS], capture_output=True, text=True, timeout=60,
                       env=_env(DUORL_PARENT_PID=f"{os.getpid()}:collector"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "False", "True"]  # line buffered, no write-through, under -u
    assert r.stderr.splitlines() == [f"duorl: the collector waits for weights > {i}" for i in range(20)]


def _stderr_writes(cmd: list[str], env: dict[str, str], trace: Path) -> tuple[list[str], list[str]]:
    """(the write calls to fd 2, the lines the command wrote to stderr)."""
    r = subprocess.run(["strace", "-f", "-qq", "-e", "trace=write", "-o", str(trace), *cmd], env=env,
                       capture_output=True, text=True, timeout=120)
    return [line for line in trace.read_text().splitlines() if " write(2, " in line], r.stderr.splitlines()


@pytest.mark.skipif(shutil.which("strace") is None, reason="counts write calls with strace")
def test_one_write_per_line_in_a_rank_and_in_the_duorl_command(tmp_path: Path) -> None:
    # strace is the child's parent here, so the child path is taken the torchrun way (no parent pid to check)
    rank = _env(TORCHELASTIC_RUN_ID="t", RANK="0", LOCAL_RANK="0")
    writes, lines = _stderr_writes([sys.executable, "-c", CHILD_REPORTS], rank, tmp_path / "rank.txt")
    if not writes:
        pytest.skip("strace cannot trace here (no ptrace)")
    assert len(lines) == 20 and len(writes) == 20, writes[:4]  # one write per line, none a lone newline
    assert not [w for w in writes if 'write(2, "\\n", 1)' in w]
    # the duorl command's own lines: a refusal (one line on stderr, before anything is built)
    cmd = [sys.executable, "-m", "duorl", "train", "--sim", "mujoco", "training.num_envs=0"]
    writes, lines = _stderr_writes(cmd, _env(), tmp_path / "cmd.txt")
    assert len(lines) == 1 and "training.num_envs=0" in lines[0]
    assert len(writes) == 1, writes
