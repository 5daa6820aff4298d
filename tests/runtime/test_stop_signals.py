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


def test_a_second_ctrl_c_stops_at_once(monkeypatch, tmp_path, capsys) -> None:
    _signalled_config(monkeypatch, signal.SIGINT, signal.SIGINT)
    assert main([*ARGV, f"training.log_dir={tmp_path / 'run'}"]) == 0
    err = capsys.readouterr().err
    assert "duorl: interrupted" in err and "Traceback" not in err and not (tmp_path / "run").exists()


def test_a_rank_does_not_escalate_a_second_sigint() -> None:
    with stop_signals(escalate=False):
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)  # the launcher passing the first one on
        assert early_stop_signal() == signal.SIGINT
    assert early_stop_signal() is None
