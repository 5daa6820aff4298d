"""Where the algorithms' YAML defaults live (the defaults/ folder). A task's defaults are the task
layer's own (config/tasks.TaskFacts.defaults)."""

from __future__ import annotations

from pathlib import Path

DEFAULTS_DIR = Path(__file__).resolve().parent / "defaults"


def algo_yaml(algo: str) -> Path:
    return DEFAULTS_DIR / "algo" / f"{algo}.yaml"
