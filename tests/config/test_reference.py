"""The schema documents itself: every key has a one-line meaning, docs/configuration.md is generated from
it, and `duorl config` shows each value's source."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from duorl.config.catalog import yaml_task_names
from duorl.config.keys import describe
from duorl.config.load import config_to_dict, resolve_config
from duorl.config.reference import REGENERATE, markdown, resolved_yaml

PAGE = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_every_key_has_a_one_line_meaning() -> None:
    missing = [k for k, info in describe().items() if not info.help]
    assert not missing, (f"keys without a meaning: {', '.join(missing)}. Declare each in config/schema.py as "
                         f"`name: type = setting(default, \"one-line meaning\")`, then run `{REGENERATE}`")
    multi = [k for k, info in describe().items() if "\n" in info.help]
    assert not multi, f"meanings must be one line: {', '.join(multi)}"


def test_the_configuration_page_matches_the_schema() -> None:
    assert PAGE.is_file(), f"{PAGE} is missing: create it with `{REGENERATE}`"
    assert PAGE.read_text(encoding="utf-8") == markdown(), (
        f"docs/configuration.md differs from config/schema.py and the shipped YAMLs: regenerate it with "
        f"`{REGENERATE}` (from the repository root) and commit it")


def test_the_page_has_one_row_per_key_with_its_default_and_meaning() -> None:
    rows = [line for line in markdown().splitlines() if line.startswith("| `")]
    assert len(rows) == len(describe())
    for row, info in zip(rows, describe().values()):
        assert row.startswith(f"| `{info.key}` | {info.type} |") and row.endswith(f"| {info.help.replace('|', chr(92) + '|')} |")
    num_envs = next(r for r in rows if r.startswith("| `training.num_envs`"))
    assert "`64`" in num_envs and "sac.yaml: 4096" in num_envs and "pendulum_swingup: 16" in num_envs


def test_allowed_values_come_from_the_schema_settings() -> None:
    info = describe()
    assert info["algo.batch_size"].allowed == ">= 1" and info["algo.actor_lr"].allowed == "> 0"
    assert info["task.action_range"].allowed == "pd, joint_limits"
    assert info["task.penalty_curriculum"].allowed == "null, ppo, fastsac, off"
    assert info["sim.tick_cuda_graph"].allowed == "null, true, false"
    # task.name: the builtin tasks (those with a task YAML), then the other sources (envs/task_sources.py)
    assert info["task.name"].allowed.startswith(", ".join(yaml_task_names()) + "; an entry point of duorl.tasks")


@pytest.mark.parametrize("algo", ["sac", "flashsac"])
def test_resolved_yaml_parses_back_and_names_sources(algo: str) -> None:
    cfg, sources = resolve_config(algo, "g1_walk_flat", "mujoco", ["training.num_envs=8"])
    assert set(sources) == set(describe())
    assert sources["training.num_envs"] == "override" and sources["task.action_range"] == "task"
    assert sources["algo.max_iterations"] == "task"  # algo_by_name
    assert sources["algo.batch_size"] == "algo" and sources["training.seed"] == "schema"
    assert (sources["algo.name"], sources["task.name"], sources["sim.name"]) == ("--algo", "--task", "--sim")
    text = resolved_yaml(config_to_dict(cfg), sources, "header")
    assert yaml.safe_load(text) == config_to_dict(cfg)


def test_sim_picked_for_the_machine_is_auto() -> None:
    _, sources = resolve_config("sac", "pendulum_swingup", None, [])
    assert sources["sim.name"] == "auto"
    _, sources = resolve_config("sac", "pendulum_swingup", None, ["sim.name=mujoco"])
    assert sources["sim.name"] == "override"


def test_keys_shows_the_defaults_runs_start_from() -> None:
    """`duorl config --keys`: a key the shipped YAMLs set differently per task shows `per task` and each
    task's value, not the schema default no built-in run starts from."""
    from duorl.config.reference import keys_text

    lines = {line.split()[0]: line for line in keys_text().splitlines()}
    assert "str = per task" in lines["task.action_range"]
    assert "per task: g1_motion_tracking, g1_walk_flat joint_limits; pendulum_swingup pd" in lines["task.action_range"]
    # each group 'task, task value' holds what those tasks resolve to
    detail = lines["task.action_range"].rsplit("(per task: ", 1)[1].rstrip(")")
    shown = {t: group.rsplit(" ", 1)[1] for group in detail.split("; ") for t in group.rsplit(" ", 1)[0].split(", ")}
    assert set(shown) == set(yaml_task_names())
    for algo in ("sac", "flashsac", "warpsac"):
        for task in yaml_task_names():
            assert resolve_config(algo, task, "mujoco", [])[0].task.action_range == shown[task]
    # keys every built-in run starts from the schema default keep it
    assert "int = 1 " in lines["training.seed"] and "(per" not in lines["training.seed"]
    assert "per algo: sac 0.001; flashsac, warpsac 0.0" in lines["algo.weight_decay"]
