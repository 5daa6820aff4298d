"""The entry layer's side of the configuration: `--task` resolved by the task layer, its facts handed to
config (docs/design.md §1: config never imports envs).

Every command that loads a configuration comes through here: `duorl train` and `duorl config` by name,
`duorl play` and resume from a run's run_config.json. The task layer (envs/task_sources.py) resolves a
name to its source, whose `facts()` say what config needs (config/tasks.TaskFacts); the listings get the
catalog of every listed task (config/tasks.TaskCatalog).
"""

from __future__ import annotations

from typing import Any

from duorl.config import load, reference
from duorl.config.schema import Config
from duorl.envs.task_sources import source_of, task_catalog
from duorl.envs.tasks.builtin import DEFAULT_TASK


def load_config(algo: str, task: str, sim: str | None = None, overrides: list[str] | tuple[str, ...] = (),
                probe_devices: bool = True) -> Config:
    """The validated Config for `duorl train --algo ALGO --task TASK [--sim SIM] [key=value ...]`
    (config.load.load_config says the rest). ConfigError for a name no source resolves."""
    return load.load_config(algo, source_of(task).facts(), sim, overrides, probe_devices)


def resolve_config(algo: str, task: str, sim: str | None = None, overrides: list[str] | tuple[str, ...] = (),
                   probe_devices: bool = True) -> tuple[Config, dict[str, str]]:
    """load_config's Config and, per dotted key, the layer that set its value (config.load.SOURCES)."""
    return load.resolve_config(algo, source_of(task).facts(), sim, overrides, probe_devices)


def config_from_dict(data: dict[str, Any]) -> Config:
    """A run's Config from its run_config.json data, the task's keys from its source (config.load)."""
    name = (data.get("task") or {}).get("name") if isinstance(data.get("task"), dict) else None
    return load.config_from_dict(data, source_of(str(name)).facts())


def config_listing(algo: str, task: str, sim: str | None, overrides: list[str]) -> str:
    """`duorl config`: the values a run would get and where each comes from."""
    return reference.resolved_listing(algo, source_of(task).facts(), sim, overrides, DEFAULT_TASK)


def keys_listing() -> str:
    """`duorl config --keys`: every key, then each listed task's own keys."""
    return reference.keys_text(task_catalog())


def reference_page() -> str:
    """`duorl config --reference`: docs/configuration.md."""
    return reference.markdown(task_catalog())
