"""Which algorithms and tasks exist, and where their YAML defaults live (the defaults/ folder)."""

from __future__ import annotations

from pathlib import Path

DEFAULTS_DIR = Path(__file__).resolve().parent / "defaults"


def algo_yaml(algo: str) -> Path:
    return DEFAULTS_DIR / "algo" / f"{algo}.yaml"


def task_yaml(task: str) -> Path:
    return DEFAULTS_DIR / "task" / f"{task}.yaml"


def yaml_task_names() -> list[str]:
    return sorted(p.stem for p in (DEFAULTS_DIR / "task").glob("*.yaml"))


def available_tasks() -> list[str]:
    """The builtin and entry-point task names (envs/task_sources.py; import paths and mjlab ids are
    open-ended and not listed). That module is light: no torch, no simulator."""
    from duorl.envs.task_sources import task_names

    return task_names()
