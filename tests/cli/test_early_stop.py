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


def test_a_library_that_turns_the_stop_into_its_own_error_still_stops_early() -> None:
    """OmegaConf, interrupted while it builds a node, raises an AttributeError of its half-built state
    instead of the stop (a CI run's SIGINT 0.5 s into the config): after a stop that is the stop's doing."""
    import pytest

    from duorl.cli.early_stop import StoppedEarly, stops_at_once
    from duorl.runtime.stop_signals import STOP_REQUEST

    with STOP_REQUEST.listen():
        with pytest.raises(StoppedEarly):
            with stops_at_once():
                try:
                    os.kill(os.getpid(), signal.SIGINT)  # the handler raises PhaseInterrupted here
                    time.sleep(5)
                except BaseException:
                    raise AttributeError("'NoneType' object has no attribute '_invalidate_flags_cache'") from None
        with pytest.raises(ValueError):  # an error of the work itself, without a stop, stays that error
            STOP_REQUEST.signal = None
            with stops_at_once():
                raise ValueError("a bad key")
