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
    """Task names the envs registry can build.

    The registry's own list once it is loaded; before, envs/task_names.py (which the registry checks it
    matches): importing the registry pulls in torch and the simulators, which `--help` and config
    errors do not pay for.
    """
    import sys

    registry = sys.modules.get("duorl.envs.registry")
    if registry is not None:
        return sorted(registry.TASKS)
    from duorl.envs.task_names import TASKS

    return sorted(TASKS)
