"""training.cuda_process_sharing=mps fails closed before anything is built, with the remedy."""

import json

import pytest

import duorl.algos.registry
import duorl.envs.registry
import duorl.envs.task_sources
import duorl.runtime.duo
import duorl.cli.train
from duorl.cli.configure import load_config
from duorl.mps import probe as probe_mod
from tests.mps.test_probe import FakeHost


@pytest.fixture
def spies(monkeypatch):
    built = []

    def spy(name):
        def f(*a, **k):
            built.append(name)
            raise AssertionError(f"{name} was built although the MPS probe failed")

        return f

    monkeypatch.setattr(duorl.envs.registry, "make_vec_env", spy("env"))
    monkeypatch.setattr(duorl.envs.task_sources.FactorySource, "make_task", spy("task"))  # what train() builds first
    monkeypatch.setattr(duorl.algos.registry, "make_learner", spy("learner"))
    monkeypatch.setattr(duorl.runtime.duo.Duo, "run", spy("collector"))
    return built


def test_mps_on_a_cpu_machine_fails_closed_naming_cuda(tmp_path, spies, capsys):
    cfg = load_config("sac", "pendulum_swingup", "mujoco", ["training.cuda_process_sharing=mps", f"training.log_dir={tmp_path}/r"])
    assert duorl.cli.train.train(cfg) == 2
    err = capsys.readouterr().err
    assert "CUDA MPS requested" in err and "no CUDA device is visible" in err and "Fix:" in err
    assert spies == []
    assert not (tmp_path / "r").exists()  # not even a run directory


def test_mps_with_no_daemon_fails_closed_with_the_start_command(tmp_path, spies, capsys, monkeypatch):
    host = FakeHost(kinds={})
    monkeypatch.setattr(probe_mod, "RealHost", lambda: host)
    monkeypatch.setattr(duorl.cli.train, "resolve_device", lambda cfg: "cuda:0")
    cfg = load_config("sac", "pendulum_swingup", "mujoco", ["training.cuda_process_sharing=mps", f"training.log_dir={tmp_path}/r"])
    assert duorl.cli.train.train(cfg) == 2
    err = capsys.readouterr().err
    assert "duorl mps start" in err and "nvidia-cuda-mps-control -d" in err
    assert spies == []


@pytest.mark.slow
def test_null_mode_records_itself_in_the_manifest(tmp_path):
    from tests.conftest import run_duorl

    r = run_duorl(tmp_path / "r", "algo.max_iterations=2")
    assert r.returncode == 0, r.stderr[-2000:]
    manifest = json.loads((tmp_path / "r" / "run_summary.json").read_text())["runtime_manifest"]
    sharing = manifest["cuda_process_sharing"]
    assert sharing["configured"] is None and sharing["effective"] is None and sharing["server"] is None
    assert sharing["ranks"] == [
        {"configured": None, "effective": None, "validated": False, "rank": 0, "world_size": 1, "server_pid": None,
         "control_pipe": None, "learner_device": None, "collector_device": None, "learner_uuid": None,
         "collector_uuid": None, "learner_pid": None, "collector_pid": None, "client_pids": []}
    ]
    assert json.loads((tmp_path / "r" / "run_config.json").read_text())["training"]["cuda_process_sharing"] is None
