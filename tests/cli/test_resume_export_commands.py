"""`duorl resume RUN` and `duorl export RUN` (issue #39): resume is `duorl train` of the run's own
command line with training.resume=RUN; export writes what training.export_onnx=true writes at the end
of training, from the run's final checkpoint or --checkpoint."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from duorl.cli.main import main
from tests.conftest import TINY, _env, run_duorl


def _saved_run(tmp_path: Path, *overrides: str) -> Path:
    from duorl.cli.configure import load_config
    from duorl.config.load import config_to_dict

    run = tmp_path / "run"
    run.mkdir()
    cfg = load_config("flashsac", "pendulum_swingup", "mujoco", list(overrides))
    (run / "run_config.json").write_text(json.dumps(config_to_dict(cfg)))
    return run


def test_resume_is_train_with_the_runs_own_keys_then_the_overrides(tmp_path: Path) -> None:
    from duorl.cli.configure import load_config
    from duorl.cli.main import build_parser
    from duorl.cli.resume_command import resume_argv
    from duorl.config.keys import flatten
    from duorl.config.load import config_to_dict

    run = _saved_run(tmp_path, *TINY, "training.log_dir=/somewhere/old", "algo.gamma=0.97", "training.seed=7")
    (run / "checkpoints").mkdir()
    (run / "checkpoints" / "latest.json").write_text("{}")  # what training.resume's key check looks for
    argv = resume_argv(str(run), ["algo.max_iterations=40"])
    assert argv[:7] == ["train", "--algo", "flashsac", "--task", "pendulum_swingup", "--sim", "mujoco"]
    assert argv[-2:] == [f"training.resume={run}", "algo.max_iterations=40"]
    assert not [a for a in argv if a.startswith("training.log_dir=")]  # a new run directory
    args, extras = build_parser().parse_known_args(argv)
    again = flatten(config_to_dict(load_config(args.algo, args.task, args.sim, list(args.overrides) + extras)))
    saved = flatten(json.loads((run / "run_config.json").read_text()))
    differ = {k for k in saved if saved[k] != again.get(k)}
    assert differ == {"training.log_dir", "training.resume", "algo.max_iterations"}, differ


def test_override_values_read_back_as_written() -> None:
    from omegaconf import OmegaConf

    from duorl.cli.resume_command import _override_value

    for value in ("null", "true", "1e-05", "a b", "runs/x", 1e-05, 0.1, 3, True, None, [256, 256], ["cpu", "cpu"]):
        got = OmegaConf.to_container(OmegaConf.from_dotlist([f"k={_override_value(value)}"]))["k"]
        assert got == value and type(got) is type(value), (value, got)


@pytest.mark.parametrize("argv, says", [
    (["resume", "/nonexistent/run"], "RUN=/nonexistent/run: does not exist"),
    (["export", "/nonexistent/run"], "/nonexistent/run is not a duorl run directory"),
])
def test_no_run_is_refused(argv: list[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and says in err and "Fix: " in err and err.count("\n") == 1, err


def test_a_directory_without_run_config_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["resume", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "has no run_config.json" in err and "training.resume=FILE" in err, err


def test_export_refuses_an_unwritable_out_before_reading_the_run(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    run = _saved_run(tmp_path)
    assert main(["export", str(run), "--out", "/proc/duorl-export"]) == 2
    err = capsys.readouterr().err
    assert "--out=/proc/duorl-export" in err or "/proc/duorl-export" in err, err


@pytest.fixture(scope="module")
def exported_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("cmds") / "run"
    r = run_duorl(run, "algo.max_iterations=6", "training.export_onnx=true")
    assert r.returncode == 0, r.stderr[-3000:]
    return run


@pytest.mark.slow
def test_duorl_export_writes_what_the_end_of_training_writes(exported_run: Path, tmp_path: Path) -> None:
    from safetensors.torch import load_file

    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "duorl", "export", str(exported_run), "--out", str(out)],
                       capture_output=True, text=True, timeout=120, env=_env())
    assert r.returncode == 0, r.stderr
    assert "final.pt (iteration 6)" in r.stdout and str(out / "policy.onnx") in r.stdout
    ours, trained = load_file(str(out / "policy.safetensors")), load_file(str(exported_run / "export" / "policy.safetensors"))
    assert ours.keys() == trained.keys() and all(torch.equal(ours[k], trained[k]) for k in ours)
    assert (out / "policy.onnx").stat().st_size == (exported_run / "export" / "policy.onnx").stat().st_size
    ckpt = exported_run / "checkpoints" / "final.pt"
    r = subprocess.run([sys.executable, "-m", "duorl", "export", str(exported_run), "--checkpoint", str(ckpt),
                        "--out", str(tmp_path / "b")], capture_output=True, text=True, timeout=120, env=_env())
    assert r.returncode == 0 and (tmp_path / "b" / "policy.onnx").is_file(), r.stderr


@pytest.mark.slow
def test_duorl_resume_continues_the_run_into_a_new_directory(exported_run: Path, tmp_path: Path) -> None:
    new = tmp_path / "resumed"
    r = subprocess.run([sys.executable, "-m", "duorl", "resume", str(exported_run), "algo.max_iterations=10",
                        f"training.log_dir={new}"], capture_output=True, text=True, timeout=300, env=_env())
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.startswith("duorl: resume: duorl train --algo sac --task pendulum_swingup --sim mujoco ")
    s = json.loads((new / "run_summary.json").read_text())
    assert s["status"] == "completed" and s["iterations"] == 10
    assert s["runtime_manifest"]["resumed_from"]["iteration"] == 6
    # a finished run with nothing left to train: the train refusal, naming the key to raise
    r = subprocess.run([sys.executable, "-m", "duorl", "resume", str(exported_run)], capture_output=True, text=True,
                       timeout=300, env=_env())
    assert r.returncode == 2 and "algo.max_iterations=6: the checkpoint" in r.stderr, r.stderr
