"""Checks of settings that an optional extra serves (today: training.wandb, `pip install duorl[wandb]`).

Run by config.load right after config.validate, so a missing extra stops the command with one line
(exit 2) before a run directory, an environment or a learner exists. The package is located with
importlib.util.find_spec, never imported here: importing wandb costs about a second.
"""

from __future__ import annotations

import importlib.util

from duorl.config.errors import ConfigError
from duorl.config.schema import WANDB_MODES, Config


def wandb_installed() -> bool:
    """Whether `import wandb` would find a package (tests monkeypatch this)."""
    return importlib.util.find_spec("wandb") is not None


def check_extras(cfg: Config) -> None:
    t = cfg.training
    if t.wandb_mode not in WANDB_MODES:
        raise ConfigError("training.wandb_mode", t.wandb_mode, "unknown Weights & Biases mode", ", ".join(WANDB_MODES),
                          "set training.wandb_mode=offline (no network) or training.wandb_mode=online")
    if not isinstance(t.wandb_project, str) or not t.wandb_project.strip():
        raise ConfigError("training.wandb_project", t.wandb_project, "must name a project", "a non-empty name",
                          "set training.wandb_project=duorl")
    if t.wandb and not wandb_installed():
        raise ConfigError("training.wandb", True, "needs the wandb package, which is not installed",
                          "false, or true with the wandb extra installed",
                          "pip install 'duorl[wandb]' (in this environment), or remove training.wandb=true")
