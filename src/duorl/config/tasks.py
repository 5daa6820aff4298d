"""What the configuration knows of a task: the facts the task layer states and the entry layer hands over.

config/ never imports envs/ (docs/design.md §1). The entry layer (cli/configure.py) resolves `--task`
through the task layer (envs/task_sources.py) and hands `config.load` the chosen task's `TaskFacts`, and
the reference (`duorl config --keys`, docs/configuration.md) a `TaskCatalog` of the tasks it lists. What
a task knows of itself (its keys and their defaults, its shipped YAML, the backend it needs, whether its
tick can be one CUDA graph, its own check) is stated once there; config applies it without naming a task.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from duorl.config.keys import task_keys_of
from duorl.config.schema import TaskConfig


@dataclass(frozen=True)
class TaskFacts:
    """One task as the configuration sees it.

    `keys`: its dataclass of keys (TaskConfig's generic ones and its own); a run's Config holds one, and
    a `task.*` key it does not declare is refused naming the task. `defaults`: its shipped YAML layer
    (sections of any keys, and `algo_by_name`), None without one. `sim`: the one physics backend it steps
    (None: `--sim` chooses), `sim_reason` what it is, in words ("the task always steps <sim_reason>"). `tick_eager_reason`: why its collector tick cannot be one
    CUDA graph (None: it can). `tick_compile_reason`: why `sim.tick_compile` cannot hold for it (None: it
    can). `steps_in_stages`: its step can run in stages (`sim.mjlab_staged_step`). `check`: the task layer's check of the name and of its keys' values (ConfigError), run by
    `config.validate` with the other checks, so that one refusal names every bad key.
    """

    name: str
    keys: type[TaskConfig] = TaskConfig
    defaults: Path | None = None
    sim: str | None = None
    sim_reason: str = ""
    tick_eager_reason: str | None = None
    tick_compile_reason: str | None = None
    check: Callable[[TaskConfig], None] | None = None
    steps_in_stages: bool = False  # its env step can run as captured stages (sim.mjlab_staged_step)
    label: str = ""  # how listings name its defaults' file (relative to the package); '' without one

    @property
    def tick_capturable(self) -> bool:
        return self.tick_eager_reason is None

    @property
    def own_keys(self) -> tuple[str, ...]:
        """The dotted keys it declares beyond the ones every task reads, in declaration order."""
        return task_keys_of(self.keys)


@dataclass(frozen=True)
class TaskCatalog:
    """The tasks `duorl config --keys` and docs/configuration.md list (the builtin ones, entry points and
    task families; an import path is open-ended and listed only when asked for), what `task.name` admits
    in words, the `--task` default, and notes (one line each: a listed source that cannot be read)."""

    tasks: tuple[TaskFacts, ...]
    allowed: str
    default: str
    notes: tuple[str, ...] = ()

    def shipped(self) -> tuple[TaskFacts, ...]:
        """The tasks that ship a YAML layer (their runs are what `--keys` calls the shipped defaults)."""
        return tuple(t for t in self.tasks if t.defaults is not None)
