"""Checks of settings that an optional extra serves (today: training.wandb, `pip install duorl[wandb]`).

Run by config.load right after config.validate, so a missing extra stops the command with one line
(exit 2) before a run directory, an environment or a learner exists. The package is located with
importlib.util.find_spec, never imported here: importing wandb costs about a second.
"""

from __future__ import annotations

import importlib.util
import netrc
import os
from pathlib import Path
from urllib.parse import urlparse

from duorl.config.errors import ConfigError
from duorl.config.schema import WANDB_MODES, Config


def wandb_installed() -> bool:
    """Whether `import wandb` would find a package (tests monkeypatch this)."""
    return importlib.util.find_spec("wandb") is not None


def wandb_login_found() -> bool:
    """Whether an online W&B run would find credentials, read as wandb reads them without importing it:
    WANDB_API_KEY, or the API host's entry in the netrc file that `wandb login` writes ($NETRC or
    ~/.netrc). WANDB_MODE=offline or disabled in the environment needs none."""
    if os.environ.get("WANDB_API_KEY") or os.environ.get("WANDB_MODE") in ("offline", "disabled", "dryrun"):
        return True
    host = urlparse(os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai")).hostname or "api.wandb.ai"
    path = Path(os.environ.get("NETRC") or Path.home() / ".netrc")
    try:
        return netrc.netrc(str(path)).authenticators(host) is not None
    except (OSError, netrc.NetrcParseError):
        return False


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
    if t.wandb and t.wandb_mode == "online" and not wandb_login_found():
        # refused here, before the run directory exists: wandb.init would fail (or prompt) once it does
        raise ConfigError("training.wandb_mode", "online", "finds no W&B login (WANDB_API_KEY is not set and "
                          "the netrc file has no entry for the W&B host)", "online with a W&B login, or offline",
                          "run `wandb login` (or set WANDB_API_KEY), or set training.wandb_mode=offline (no "
                          "network needed; `wandb sync` uploads it later)")
