"""Configuration: dataclass schema, YAML defaults per algo and task, dotlist overrides, validation.

Names are exported lazily: most importers want only `duorl.config.schema` (spawned collectors, envs),
and should not pay for OmegaConf and YAML (about 0.15 s) through this package's __init__.
The check itself is `duorl.config.validate.validate` (the package attribute `validate` is the module).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "ALGOS": "schema", "SIMS": "schema", "Config": "schema",
    "ConfigError": "errors",
    "resolve_device": "devices",
    "best_sim": "load", "config_hash": "load", "config_to_dict": "load", "load_config": "load",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"duorl.config.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'duorl.config' has no attribute {name!r}")
