"""Which algorithms and tasks exist, and where their YAML defaults live (the defaults/ folder)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

DEFAULTS_DIR = Path(__file__).resolve().parent / "defaults"


def algo_yaml(algo: str) -> Path:
    return DEFAULTS_DIR / "algo" / f"{algo}.yaml"


def task_yaml(task: str) -> Path:
    return DEFAULTS_DIR / "task" / f"{task}.yaml"


def yaml_task_names() -> list[str]:
    return sorted(p.stem for p in (DEFAULTS_DIR / "task").glob("*.yaml"))


def available_tasks() -> list[str]:
    """The builtin and entry-point task names (envs/task_sources.py; import paths and mjlab ids are
    open-ended and not listed). The task-source module is the one import of a higher layer in config/
    (docs/design.md §1): it is light (no torch, no simulator), so `--help` and config errors do not pay
    for the envs package."""
    from duorl.envs.task_sources import task_names

    return task_names()


def task_names_allowed() -> str:
    """What `task.name` admits, in words (the task sources define it)."""
    from duorl.envs.task_sources import ALLOWED

    return ALLOWED


def check_task(task_cfg: Any) -> None:
    """Refuse a task name that resolves to no task source, or to one that does not load (InputRefused)."""
    from duorl.envs.task_sources import check_task as check

    check(task_cfg)


def tick_eager_reason(task_name: str) -> str | None:
    """Why the collector tick of `task_name` cannot be one CUDA graph (its env step syncs the host: an
    mjlab task's), None where it can (the task sources say it)."""
    from duorl.envs.task_sources import tick_eager_reason as reason

    return reason(task_name)
