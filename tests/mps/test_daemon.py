"""`duorl mps`: refusals and ownership, without a GPU."""

import json

import pytest

from duorl.mps import daemon
from tests.mps.test_probe import FakeHost


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("DUORL_MPS_HOME", str(tmp_path / "mps"))
    return tmp_path / "mps"


def test_refuses_several_gpus_at_once(monkeypatch):
    monkeypatch.setattr(daemon, "visible_gpus", lambda: ["GPU-a", "GPU-b"])
    with pytest.raises(daemon.MpsCommandError, match="CUDA_VISIBLE_DEVICES=0 duorl mps start"):
        daemon.start("x")


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
    assert st["running"] and st["servers"] == {4242: [100, 200]}
    assert daemon.status("other", host=FakeHost()) == {"name": "other", "recorded": False, "pipe_directory": str(home / "other" / "pipe"), "running": False}


def test_doctor_names_the_first_unmet_prerequisite():
    ok, lines = daemon.doctor(host=FakeHost(cuda=False), pipe_dir="/tmp/fake-mps")
    assert not ok and lines[-1].startswith("FAIL cuda")
    ok, lines = daemon.doctor(host=FakeHost(), pipe_dir="/tmp/fake-mps")
    assert ok and any("server 4242: clients [100, 200]" in line for line in lines)
