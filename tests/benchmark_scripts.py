"""A script of benchmarks/scripts/ imported as a module, for the tests of its pure functions."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

SCRIPTS = Path(__file__).resolve().parents[1] / "benchmarks" / "scripts"


def load_script(name: str) -> ModuleType:
    """benchmarks/scripts/<name>.py, executed once per call as a fresh module."""
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    assert spec is not None and spec.loader is not None, f"{name}.py is not under {SCRIPTS}"
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
