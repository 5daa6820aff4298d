"""runtime/socket_dir.py with real processes: under a TMPDIR too long for multiprocessing's Unix socket, a
shared CPU tensor cannot be sent through a pipe (the CI failure: every data-parallel collector saw its learner
hang up); after ensure_short_socket_dir it is, and the folder chosen is short."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from duorl.runtime.socket_dir import SUN_PATH_MAX, fits

_SEND = r"""
import json, sys
import torch, torch.multiprocessing as mp

def child(conn):
    conn.recv()

if __name__ == "__main__":
    if sys.argv[1] == "ensured":
        from duorl.runtime.socket_dir import ensure_short_socket_dir
        chosen = ensure_short_socket_dir()
    else:
        chosen = None
    ctx = mp.get_context("spawn")
    r, w = ctx.Pipe(duplex=False)
    p = ctx.Process(target=child, args=(r,))
    p.start()
    r.close()
    t = torch.ones(4)
    t.share_memory_()
    try:
        w.send(t)
        error = None
    except OSError as e:
        error = str(e)
    w.close()
    p.join(30)
    print(json.dumps({"error": error, "chosen": chosen, "child_code": p.exitcode}))
"""


def _long_tmpdir(tmp_path: Path) -> Path:
    long = tmp_path
    while len(str(long)) < SUN_PATH_MAX - 20:
        long = long / "a_long_scratch_folder"
    long.mkdir(parents=True)
    assert not fits(str(long))
    return long


def _send(tmp_path: Path, mode: str) -> dict:
    script = tmp_path / "send.py"
    script.write_text(_SEND)
    env = dict(os.environ, TMPDIR=str(_long_tmpdir(tmp_path / mode)), OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, str(script), mode], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_long_tmpdir_fails_the_send_and_the_short_socket_dir_mends_it(tmp_path: Path) -> None:
    plain = _send(tmp_path, "plain")
    assert plain["error"] is not None and "too long" in plain["error"]  # the condition CI met
    ensured = _send(tmp_path, "ensured")
    assert ensured["error"] is None and ensured["child_code"] == 0
    assert fits(os.path.dirname(ensured["chosen"])) and not ensured["chosen"].startswith(str(tmp_path))
    assert not os.path.exists(ensured["chosen"])  # multiprocessing removed its folder at the exit


def test_a_short_tmpdir_is_kept() -> None:
    assert fits("/tmp") and not fits("/" + "x" * (SUN_PATH_MAX - 20))


def test_a_short_tmpdir_creates_nothing_ahead(tmp_path: Path) -> None:
    """Where TMPDIR is short enough, multiprocessing's own folder is left to multiprocessing (created
    only when a descriptor is sent)."""
    code = ("import multiprocessing; from duorl.runtime.socket_dir import ensure_short_socket_dir; "
            "print(ensure_short_socket_dir(), multiprocessing.current_process()._config.get('tempdir'))")
    out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, TMPDIR=str(tmp_path)),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["None", "None"] and not list(tmp_path.iterdir())
