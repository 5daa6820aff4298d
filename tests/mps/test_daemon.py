"""`duorl mps`: refusals and ownership, without a GPU."""

import json

import pytest

from duorl.mps import daemon
from tests.mps.test_probe import FakeHost


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("DUORL_MPS_HOME", str(tmp_path / "mps"))
    return tmp_path / "mps"


def test_one_daemon_serves_every_visible_gpu(monkeypatch, home):
    """A data-parallel run's ranks on one host share one daemon: start it for all visible GPUs."""
    monkeypatch.setattr(daemon, "visible_gpus", lambda: ["GPU-a", "GPU-b"])
    monkeypatch.setattr(daemon, "_mig_enabled", lambda: False)
    calls = []

    def fake_run(cmd, env, **kw):
        calls.append((cmd, env["CUDA_MPS_PIPE_DIRECTORY"]))
        return type("R", (), {"returncode": 0, "stdout": "", "stderr": ""})()

    monkeypatch.setattr(daemon.subprocess, "run", fake_run)
    monkeypatch.setattr(daemon, "_answers", lambda pipe: True)
    st = daemon.start("dp")
    assert st["gpus"] == ["GPU-a", "GPU-b"] and calls == [(["nvidia-cuda-mps-control", "-d"], str(home / "dp" / "pipe"))]
    assert json.loads((home / "dp" / "state.json").read_text())["gpus"] == ["GPU-a", "GPU-b"]


def test_stop_refuses_a_daemon_that_still_serves_clients(home, monkeypatch, capsys):
    pipe, log, state = daemon.daemon_dirs("busy")
    state.parent.mkdir(parents=True)
    state.write_text(json.dumps({"name": "busy"}))
    monkeypatch.setattr(daemon, "RealHost", lambda: FakeHost())
    with pytest.raises(daemon.MpsCommandError, match="still serves 2 client process.*--force"):
        daemon.stop("busy", host=FakeHost())
    assert daemon.mps_main("stop", "busy") == 2 and "--force" in capsys.readouterr().err
    assert state.exists()  # nothing was stopped


def test_refuses_mig(monkeypatch):
    monkeypatch.setattr(daemon, "visible_gpus", lambda: ["GPU-a"])
    monkeypatch.setattr(daemon, "_mig_enabled", lambda: True)
    with pytest.raises(daemon.MpsCommandError, match="MIG is enabled"):
        daemon.start("x")


def test_no_driver_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    assert daemon.mps_main("start", "x") == 2


def test_stop_only_stops_what_duorl_started(capsys):
    assert daemon.mps_main("stop", "never-started") == 1
    assert "nothing stopped" in capsys.readouterr().err


def test_status_reports_servers_and_clients(home):
    pipe, log, state = daemon.daemon_dirs("s")
    state.parent.mkdir(parents=True)
    state.write_text(json.dumps({"name": "s"}))
    st = daemon.status("s", host=FakeHost())
    assert st["running"] and [c["pid"] for c in st["servers"][4242]] == [100, 200]
    assert daemon.status("other", host=FakeHost()) == {"name": "other", "recorded": False, "pipe_directory": str(home / "other" / "pipe"), "running": False}


def test_doctor_names_the_first_unmet_prerequisite():
    ok, lines = daemon.doctor(host=FakeHost(cuda=False), pipe_dir="/tmp/fake-mps")
    assert not ok and lines[-1].startswith("FAIL cuda")
    ok, lines = daemon.doctor(host=FakeHost(), pipe_dir="/tmp/fake-mps")
    assert ok and any("server 4242: clients [100, 200]" in line for line in lines)
