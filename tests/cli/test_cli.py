"""`duorl train | metrics` routing: help text, error exits, the metrics table/JSON."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import types
from pathlib import Path

import pytest
import yaml

import duorl.config.devices as devices
from duorl import __version__
from duorl.cli.main import _subparser, build_parser, main, subcommands
from duorl.config import Config


@pytest.fixture(autouse=True)
def no_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(devices, "cuda_device_count", lambda: 0)


@pytest.fixture
def fake_train(monkeypatch: pytest.MonkeyPatch) -> list[Config]:
    """Replace duorl.cli.train so that `train` records its config instead of training (and checks that the
    collector's process it is given was started before, and is alive)."""
    calls: list[Config] = []
    mod = types.ModuleType("duorl.cli.train")

    def train(cfg: Config, prestarted: object = None) -> int:
        assert prestarted is not None and prestarted.process.is_alive()  # type: ignore[attr-defined]
        calls.append(cfg)
        return 0

    mod.train = train  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "duorl.cli.train", mod)
    return calls


def test_train_help_lists_algos_tasks_sims_and_syntax(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "--help"]) == 0
    out = capsys.readouterr().out
    for word in ("sac", "flashsac", "warpsac", "pendulum_swingup", "mujoco", "mjwarp", "key=value"):
        assert word in out, word
    assert out.count("duorl train ") >= 2  # two examples
    assert "g1_walk_flat" in out and "g1_motion_tracking" in out


def test_top_level_help_and_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "train" in out and "metrics" in out
    assert main(["--version"]) == 0
    assert __version__ in capsys.readouterr().out
    assert main([]) == 2


def test_python_dash_m_duorl() -> None:
    r = subprocess.run([sys.executable, "-m", "duorl", "--version"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == f"duorl {__version__}"


def test_train_passes_a_validated_config(fake_train: list[Config]) -> None:
    # key=value pairs may come before, between and after options
    assert main(["train", "algo.batch_size=32", "--sim", "mujoco", "algo.max_iterations=5", "--algo", "sac", "training.seed=3"]) == 0
    (cfg,) = fake_train
    assert (cfg.algo.batch_size, cfg.algo.max_iterations, cfg.training.seed) == (32, 5, 3)
    assert (cfg.algo.name, cfg.task.name, cfg.sim.name) == ("sac", "pendulum_swingup", "mujoco")


@pytest.mark.parametrize(("argv", "needle"), [
    (["train", "algo.batch_size=abc"], "algo.batch_size=abc"),
    (["train", "training.num_env=4"], "training.num_envs"),
    (["train", "batchsize"], "malformed override"),
    (["train", "--algo", "flashsac", "algo.replay_min_weight=2"], "algo.replay_min_weight"),
    (["train", "--task", "nope"], "task.name=nope"),
    (["train", "training.cuda_process_sharing=nvidia"], "training.cuda_process_sharing=nvidia"),
])
def test_bad_config_is_one_error_line_and_exit_2(
    argv: list[str], needle: str, fake_train: list[Config], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and needle in err and "Traceback" not in err
    assert fake_train == []


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "--bogus"]) == 2
    assert main(["train", "--sim", "bullet"]) == 2
    assert main(["metrics"]) == 2
    assert main(["play"]) == 2  # only train and metrics exist
    capsys.readouterr()


# --- metrics -------------------------------------------------------------------------------------


def _run_dir(tmp_path: Path, n: int = 150) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    with open(run / "metrics.jsonl", "w") as f:
        for i in range(1, n + 1):
            row = {"iteration": i, "env_steps": 16 * i, "wall_s": 0.01 * i, "Perf/iteration_ms": float(i),
                   "Train/mean_reward": None if i % 2 else 0.5, "note": "x"}
            f.write(json.dumps(row) + "\n")
    return run


def test_metrics_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run_dir(tmp_path)
    assert main(["metrics", str(run)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "last 100" in out[0] and "(51..150)" in out[0]
    table = {line.split()[0]: line.split()[1] for line in out[1:]}
    assert table["Perf/iteration_ms"] == "100.5" and table["Train/mean_reward"] == "0.5"
    assert "note" not in table
    # aligned: every value ends in the same column
    assert len({len(line) for line in out[1:]}) == 1


def test_metrics_json_and_last(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run_dir(tmp_path)
    with open(run / "metrics.jsonl", "a") as f:
        f.write(json.dumps({"iteration": 151, "Perf/iteration_ms": float("nan")}) + "\n")
    assert main(["metrics", str(run), "--last", "10", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["run_dir"] == str(run) and data["iterations"] == [142, 151] and data["n"] == 10
    assert data["mean"]["Perf/iteration_ms"] == pytest.approx(sum(range(142, 151)) / 9)
    # also accepts the file itself
    assert main(["metrics", str(run / "metrics.jsonl"), "--last", "1", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["mean"]["Perf/iteration_ms"] is None  # all-NaN -> null, still valid JSON


@pytest.mark.parametrize(("setup", "needle"), [
    ("missing_dir", "does not exist"),
    ("missing_file", "not found"),
    ("empty_file", "no rows yet"),
    ("bad_line", "not a JSON object"),
])
def test_metrics_errors(tmp_path: Path, setup: str, needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    if setup != "missing_dir":
        run.mkdir()
    if setup == "empty_file":
        (run / "metrics.jsonl").write_text("")
    if setup == "bad_line":
        (run / "metrics.jsonl").write_text("{bad\n{}\n")
    assert main(["metrics", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and needle in err


def test_metrics_last_must_be_positive(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["metrics", str(_run_dir(tmp_path, 3)), "--last", "0"]) == 2
    assert "--last" in capsys.readouterr().err


# --- every command's own --help ------------------------------------------------------------------


def _command_paths(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command of the argparse tree, the top level included: new subcommands are covered too."""
    out = [path]
    for name, sub in subcommands(parser).items():
        out += _command_paths(sub, (*path, name))
    return out


def test_every_command_has_its_own_help_with_its_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    paths = _command_paths(parser)
    assert ("mps", "start") in paths and ("assets", "g1") in paths and ("bench", "mps") in paths
    assert ("config",) in paths
    pages: dict[str, tuple[str, ...]] = {}
    for path in paths:
        assert main([*path, "--help"]) == 0, path
        out = capsys.readouterr().out
        assert out.startswith(" ".join(("usage: duorl", *path))), (path, out[:80])
        assert out not in pages, f"`duorl {' '.join(path)} --help` repeats `duorl {' '.join(pages.get(out, ()))} --help`"
        pages[out] = path
        own = _subparser(parser, list(path))
        assert own.description or getattr(own, "lazy_description", None), f"`duorl {' '.join(path)}` has no description"
        for action in own._actions:
            if isinstance(action, argparse._SubParsersAction):
                for choice in action._choices_actions:  # the one-line summary in this page's listing
                    assert choice.help, f"`duorl {' '.join((*path, choice.dest))}` has no summary line"
            elif action.option_strings and action.default not in (None, False, argparse.SUPPRESS):
                # an option with a default says it (the value a user gets without typing it)
                assert "default" in (action.help or ""), f"`duorl {' '.join(path)} {action.option_strings[-1]}` does not say its default {action.default!r}"


def test_a_command_group_without_action_shows_its_own_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mps"]) == 2
    assert capsys.readouterr().err.startswith("usage: duorl mps")


# --- duorl config --------------------------------------------------------------------------------


def test_config_prints_the_resolved_yaml_with_sources(capsys: pytest.CaptureFixture[str]) -> None:
    from duorl.cli.configure import load_config
    from duorl.config.load import config_to_dict

    assert main(["config", "--task", "pendulum_swingup", "--sim", "mujoco", "training.seed=3"]) == 0
    out = capsys.readouterr().out
    assert yaml.safe_load(out) == config_to_dict(load_config("sac", "pendulum_swingup", "mujoco", ["training.seed=3"]))
    source = {line.split(":")[0].strip(): line.rsplit("# ", 1)[1] for line in out.splitlines()
              if not line.startswith("#") and "# " in line}
    assert source["seed"] == "override" and source["num_envs"] == "task"  # task YAML beats sac.yaml's 4096
    assert source["num_atoms"] == "algo" and source["eval_envs"] == "schema" and source["alpha_init"] == "task"
    assert source["name"] in ("--algo", "--task", "--sim")
    assert "# value sources:" in out and "defaults/algo/sac.yaml" in out


def test_config_keys_lists_every_key_with_its_meaning(capsys: pytest.CaptureFixture[str]) -> None:
    """Every key every run has, then each listed task's own keys under its name."""
    from duorl.config.keys import describe, task_keys_of
    from duorl.envs.task_sources import source_of

    assert main(["config", "--keys"]) == 0
    generic, _, per_task = capsys.readouterr().out.partition("\n# each task's own keys")
    lines = {line.split()[0]: line for line in generic.splitlines() if line}
    assert set(lines) == set(describe())
    for key, info in describe().items():
        # the meaning ends the line, or is followed by the per-task/per-algo defaults (`= per task` etc.)
        line = lines[key]
        assert info.help and (line.endswith(info.help) or (f"= per " in line and f"{info.help} (per " in line))
    for task in ("g1_walk_flat", "g1_motion_tracking"):
        own = per_task.split(f"\n{task}:\n", 1)[1].split("\n")
        keys = task_keys_of(source_of(task).keys)
        assert [line.split()[0] for line in own[:len(keys)]] == list(keys) and own[0].startswith("  task.")
    assert "\npendulum_swingup: none of its own" in per_task
    assert main(["config", "--keys", "training.seed=1"]) == 2  # the schema takes no overrides
    assert "takes no key=value" in capsys.readouterr().err


def test_config_refuses_an_unknown_key_with_close_matches(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "algo.bach_size=5"]) == 2
    err = capsys.readouterr().err
    assert "algo.batch_size" in err and "duorl config --keys" in err and err.count("\n") == 1


def test_wandb_without_the_extra_is_refused_before_training(
    monkeypatch: pytest.MonkeyPatch, fake_train: list[Config], capsys: pytest.CaptureFixture[str]
) -> None:
    import duorl.config.extras as extras

    monkeypatch.setattr(extras, "wandb_installed", lambda: False)
    assert main(["train", "training.wandb=true"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'duorl[wandb]'" in err and fake_train == []
