"""SIGINT/SIGTERM from the start of `duorl train` (runtime/stop_signals.py): an early Ctrl-C is a stop
request (exit 0, nothing written), a second one stops at once (exit 0, no traceback), and the handlers
are gone once the command returns."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

import duorl.config.devices as devices
import duorl.config.load as load
from duorl.cli.main import main
from duorl.runtime.stop_signals import early_stop_signal, stop_signals
from tests.conftest import TINY

ARGV = ["train", "--sim", "mujoco", *(o for o in TINY if "torch_threads" not in o), "algo.max_iterations=2"]


@pytest.fixture(autouse=True)
def _cpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(devices, "cuda_device_count", lambda: 0)
    monkeypatch.chdir(tmp_path)


def _signalled_config(monkeypatch: pytest.MonkeyPatch, *signals: int) -> None:
    """Signals arrive while the configuration loads (the first seconds of a run)."""
    real = load.load_config

    def config(*a, **k):
        for sig in signals:
            os.kill(os.getpid(), sig)
        return real(*a, **k)

    monkeypatch.setattr(load, "load_config", config)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_early_stop_request_ends_the_run_before_anything_is_written(sig, monkeypatch, tmp_path, capfd) -> None:
    before = signal.getsignal(signal.SIGINT)
    _signalled_config(monkeypatch, sig)
    assert main([*ARGV, f"training.log_dir={tmp_path / 'run'}"]) == 0
    err = capfd.readouterr().err  # the handler writes to fd 2 (a print could re-enter an interrupted one)
    assert "stopping at the next safe point" in err and "stopped before the run started" in err
    assert "Traceback" not in err and not (tmp_path / "run").exists() and not (tmp_path / "runs").exists()
    assert signal.getsignal(signal.SIGINT) is before and early_stop_signal() is None


def test_a_second_ctrl_c_while_the_inputs_are_checked_stops_at_once(monkeypatch, tmp_path, capsys) -> None:
    """The first Ctrl-C already abandons the checks (cli/early_stop.py); the second, the at-once escalation,
    lands in the same window and must not turn that into a traceback or a half-written run. A double Ctrl-C
    once the run has started: tests/runtime/test_killed_runs.py."""
    from duorl.cli.early_stop import STOPPED

    _signalled_config(monkeypatch, signal.SIGINT, signal.SIGINT)
    assert main([*ARGV, f"training.log_dir={tmp_path / 'run'}"]) == 0
    err = capsys.readouterr().err
    assert STOPPED in err and "Traceback" not in err and not (tmp_path / "run").exists()


def test_a_rank_does_not_escalate_a_second_sigint() -> None:
    with stop_signals(escalate=False):
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)  # the launcher passing the first one on
        assert early_stop_signal() == signal.SIGINT
    assert early_stop_signal() is None


_EARLY = """
import os, signal, sys
from duorl.runtime import orphans
from duorl.runtime.stop_signals import STOP_REQUEST
role = sys.argv[1]
got = []
if role == "none":  # nobody listens: the handlers from before come back and get the signal again
    before = {signal.SIGTERM: lambda s, f: got.append(s), signal.SIGINT: signal.SIG_IGN}
    orphans.arm_from_environment([signal.SIGINT, signal.SIGTERM], before)
    print(got == [signal.SIGTERM], signal.getsignal(signal.SIGINT) is signal.SIG_IGN)
    sys.exit(0)
os.environ[orphans.PARENT_ENV] = orphans.parent_entry(os.getppid(), role)
orphans.arm_from_environment([signal.SIGINT] if role == orphans.RANK else [signal.SIGINT, signal.SIGTERM], {})
if role == orphans.RANK:
    print(STOP_REQUEST.signal == signal.SIGINT, STOP_REQUEST.listening)
else:
    print(orphans.early_sigterm, signal.getsignal(signal.SIGINT) is signal.SIG_IGN)
"""


@pytest.mark.parametrize("role", ["rank", "collector", "none"])
def test_signals_before_the_handlers_exist_are_handed_to_them(role):
    """duorl/__init__.py records SIGINT/SIGTERM from a child's first instruction (a launcher's stop can
    arrive while the child is still importing): a rank makes the first its stop request, a collector
    keeps the SIGTERM and ignores the SIGINT, and a process that arms nothing gets them delivered to its
    previous handlers."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("DUORL_PARENT_PID", "TORCHELASTIC_RUN_ID")}
    p = subprocess.run([sys.executable, "-c", _EARLY, role], capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["True", "True"], (p.stdout, p.stderr)
    assert "Traceback" not in p.stderr


@pytest.mark.parametrize("signals,says", [([signal.SIGINT], "SIGINT: stopping at the next safe point"),
                                          ([signal.SIGINT, signal.SIGINT], "stopped before the run started")])
def test_a_signal_before_the_handler_existed_is_a_stop_request(signals, says, tmp_path) -> None:
    """A SIGINT 0.02-0.05 s after `duorl train` started landed in duorl/__main__.py's own imports, before
    the stop request listened: a KeyboardInterrupt traceback (test_faults' stop at any moment, under load).
    duorl's first lines record it; run() hands it to the stop request: exit 0, nothing written."""
    import subprocess
    import sys

    code = (f"import sys, duorl; duorl.command_early_signals = {list(map(int, signals))}; "
            f"sys.argv = ['duorl', *{ARGV!r}, 'training.log_dir={tmp_path / 'run'}']; "
            "from duorl.__main__ import run; run()")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert says in r.stderr and "stopped before the run started" in r.stderr, r.stderr[-2000:]
    assert not (tmp_path / "run").exists()
