"""The schema documents itself: every key has a one-line meaning, docs/configuration.md is generated from
it, and `duorl config` shows each value's source."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from duorl.cli.configure import keys_listing, reference_page, resolve_config
from duorl.config.keys import describe, task_keys_of
from duorl.config.load import config_to_dict
from duorl.config.reference import REGENERATE, resolved_yaml
from duorl.envs.task_sources import source_of, task_catalog
from duorl.envs.tasks.builtin import BUILTIN

PAGE = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def _every_key() -> dict:
    """The keys every run has and each listed task's own."""
    out = dict(describe())
    for task in task_catalog().tasks:
        out.update(describe(task.keys))
    return out


def test_every_key_has_a_one_line_meaning() -> None:
    missing = [k for k, info in _every_key().items() if not info.help]
    assert not missing, (f"keys without a meaning: {', '.join(missing)}. Declare each in config/schema.py as "
                         f"`name: type = setting(default, \"one-line meaning\")`, then run `{REGENERATE}`")
    multi = [k for k, info in _every_key().items() if "\n" in info.help]
    assert not multi, f"meanings must be one line: {', '.join(multi)}"


def test_the_configuration_page_matches_the_schema() -> None:
    assert PAGE.is_file(), f"{PAGE} is missing: create it with `{REGENERATE}`"
    assert PAGE.read_text(encoding="utf-8") == reference_page(), (
        f"docs/configuration.md differs from config/schema.py and the shipped YAMLs: regenerate it with "
        f"`{REGENERATE}` (from the repository root) and commit it")


def test_the_page_has_one_row_per_key_with_its_default_and_meaning() -> None:
    """The keys every run has, then each listed task's own keys under its name."""
    page = reference_page()
    generic, _, per_task = page.partition("## Each task's own keys")
    rows = [line for line in generic.splitlines() if line.startswith("| `")]
    assert len(rows) == len(describe())
    for row, info in zip(rows, describe().values()):
        assert row.startswith(f"| `{info.key}` | {info.type} |") and row.endswith(f"| {info.help.replace('|', chr(92) + '|')} |")
    num_envs = next(r for r in rows if r.startswith("| `training.num_envs`"))
    assert "`64`" in num_envs and "sac.yaml: 4096" in num_envs and "pendulum_swingup: 16" in num_envs
    for task in task_catalog().tasks:
        section = per_task.split(f"### `{task.name}`\n", 1)[1].split("\n### ", 1)[0]
        own = [line for line in section.splitlines() if line.startswith("| `")]
        assert [r.split("`")[1] for r in own] == list(task_keys_of(task.keys)), task.name
    walk = per_task.split("### `g1_walk_flat`", 1)[1].split("### ", 1)[0]
    assert "| `task.action_range` | str | `pd` | pd, joint_limits | g1_walk_flat: joint_limits |" in walk


def test_allowed_values_come_from_the_schema_settings() -> None:
    info = describe()
    assert info["algo.batch_size"].allowed == ">= 1" and info["algo.actor_lr"].allowed == "> 0"
    walk = describe(source_of("g1_walk_flat").keys)
    assert walk["task.action_range"].allowed == "pd, joint_limits"
    assert walk["task.penalty_curriculum"].allowed == "null, ppo, fastsac, off"
    assert info["sim.tick_cuda_graph"].allowed == "null, true, false"
    # task.name: the builtin tasks, then the other sources, in the task layer's words (envs/task_sources.py)
    assert task_catalog().allowed.startswith(", ".join(sorted(BUILTIN)) + "; an entry point of duorl.tasks")
    assert f"| `task.name` | str | `pendulum_swingup` | {task_catalog().allowed} |" in reference_page()


@pytest.mark.parametrize("algo", ["sac", "flashsac"])
def test_resolved_yaml_parses_back_and_names_sources(algo: str) -> None:
    cfg, sources = resolve_config(algo, "g1_walk_flat", "mujoco", ["training.num_envs=8"])
    assert set(sources) == set(describe(type(cfg.task)))
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
    task's value, not the schema default no built-in run starts from; each task's own keys follow under
    its name, with the value its runs start from."""
    text = keys_listing()
    generic, _, per_task = text.partition("# each task's own keys")
    lines = {line.split()[0]: line for line in generic.splitlines() if line.strip()}
    assert "str = per task" in lines["training.num_envs"] or "per " in lines["training.num_envs"]
    assert "task.action_range" not in lines and "task.name" in lines and "= pendulum_swingup" in lines["task.name"]
    walk = per_task.split("\ng1_walk_flat:\n", 1)[1].split("\n", 3)
    assert walk[0].split()[0] == "task.robot_xml" and walk[1].split()[0] == "task.action_range"
    assert "str = joint_limits" in walk[1] and "(its YAML; the key's default pd)" in walk[1]
    for algo in ("sac", "flashsac", "warpsac"):
        assert resolve_config(algo, "g1_walk_flat", "mujoco", [])[0].task.action_range == "joint_limits"
    assert "\npendulum_swingup: none of its own\n" in per_task
    # keys every built-in run starts from the schema default keep it
    assert "int = 1 " in lines["training.seed"] and "(per" not in lines["training.seed"]
    assert "per algo: sac 0.001; flashsac, warpsac 0.0" in lines["algo.weight_decay"]
