"""A Ctrl-C while a slow task factory runs, before the run directory exists, stops `duorl train` at once
(cli/early_stop.py; issue #39: it waited 43-172 s for the factory's remaining calls), after duorl said what
it waits on."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from tests.conftest import duorl_cmd

ROOT = Path(__file__).resolve().parents[2]


def test_ctrl_c_during_a_slow_factory_stops_at_once(tmp_path: Path, duorl_env: dict[str, str]) -> None:
    env = {**duorl_env, "DUORL_TEST_SLOW_S": "120",
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), duorl_env.get("PYTHONPATH", "")) if p)}
    run = tmp_path / "run"
    p = subprocess.Popen(duorl_cmd(run, task="tests.envs.bad_tasks:slow"), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    assert p.stderr is not None
    try:
        first = p.stderr.readline()  # blocks until duorl names what it waits on (5 s into the factory)
        assert first.startswith("duorl: waiting for task factory tests.envs.bad_tasks:slow ("), first
        t0 = time.monotonic()
        p.send_signal(signal.SIGINT)
        code = p.wait(timeout=30)
        waited = time.monotonic() - t0
        rest = p.stderr.read()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert code == 0 and waited < 5, (code, waited, rest)
    assert "stopped before the run started (nothing was written)" in rest and "Traceback" not in rest, rest
    assert not run.exists()
