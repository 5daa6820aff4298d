"""What an mjlab task refuses, in this process through `duorl.cli.main` (before anything of a run is built:
exit code 2, one line naming the key or task and the fix, no run directory) and the config's switches."""

from __future__ import annotations

import importlib.util

import pytest

from duorl.cli.main import main
from duorl.config.errors import ConfigError
from duorl.cli.configure import load_config

TASK = "mjlab:Mjlab-Cartpole-Swingup"
CPU = ["training.devices=[cpu]"]


def _refused(capsys, tmp_path, argv: list[str], *named: str) -> str:
    run = tmp_path / "run"
    assert main(["train", *argv, f"training.log_dir={run}", *CPU]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "\n" not in err, err
    for text in named:
        assert text in err, (text, err)
    assert not run.exists()
    return err


def test_sim_mujoco_is_refused(capsys, tmp_path):
    _refused(capsys, tmp_path, ["--task", TASK, "--sim", "mujoco"], "sim.name=mujoco", "--sim mjwarp")


def test_unknown_id_names_the_closest(capsys, tmp_path):
    _refused(capsys, tmp_path, ["--task", "mjlab:Mjlab-Cartpole-Swingp", "--sim", "mjwarp"],
             "unknown mjlab task id", "mjlab:Mjlab-Cartpole-Swingup")


def test_camera_task_is_refused_with_the_reason(capsys, tmp_path):
    _refused(capsys, tmp_path, ["--task", "mjlab:Mjlab-Lift-Cube-Yam-Rgb", "--sim", "mjwarp"], "camera images")


def test_missing_mjlab_names_the_install_command(capsys, tmp_path, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "mjlab" else real(name, *a))
    _refused(capsys, tmp_path, ["--task", TASK, "--sim", "mjwarp"], f"task.name={TASK}", "pip install 'duorl[mjlab]'")


@pytest.mark.parametrize("key", ["sim.tick_cuda_graph", "sim.tick_compile"])
def test_switches_of_duorls_own_tick_are_refused(key):
    with pytest.raises(ConfigError, match=key):
        load_config("sac", TASK, "mjwarp", [*CPU, f"{key}=true"], probe_devices=False)


def test_the_tick_of_an_mjlab_task_is_eager_even_on_cuda():
    """The switch reads the task source's fact (not the name), and the VecEnv mjlab builds says the same."""
    from duorl.config.switches import resolve_switches
    from duorl.envs.mjlab.vec_env import MjlabVecEnv
    from duorl.envs.task_sources import source_of

    cfg = load_config("sac", TASK, "mjwarp", CPU, probe_devices=False)
    source = source_of(cfg.task.name)
    assert source.tick_capturable is False and MjlabVecEnv.tick_capturable is False
    assert resolve_switches(cfg, "cuda:0", tick_capturable=source.tick_capturable).tick_cuda_graph is False
    builtin = load_config("sac", "pendulum_swingup", "mjwarp", CPU, probe_devices=False)
    assert resolve_switches(builtin, "cuda:0", tick_capturable=source_of(builtin.task.name).tick_capturable
                            ).tick_cuda_graph is True
