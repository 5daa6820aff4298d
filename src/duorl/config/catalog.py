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

    The registry is imported lazily (it pulls in torch and the simulators, which `--help` and config
    errors should not pay for unless they need the list); it is the one import of a higher layer in
    config/ (docs/design.md §1). Where the envs package cannot be imported at all, the task YAML files
    stand in for it; any other import failure is a real bug and propagates.
    """
    try:
        from duorl.envs.registry import TASKS
    except ModuleNotFoundError as e:
        if e.name not in ("duorl.envs.registry", "duorl.envs"):
            raise
        return yaml_task_names()
    return sorted(TASKS)
