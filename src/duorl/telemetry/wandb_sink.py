"""Weights & Biases as a third metrics sink beside metrics.jsonl and TensorBoard (training.wandb=true).

The same rows under the same names, stepped by env steps as in TensorBoard. The run is named after the
run directory and its files live inside it (RUN_DIR/wandb/), so an offline run (training.wandb_mode=
offline: no network, no account) travels with the run and `wandb sync RUN_DIR/wandb/offline-run-*`
uploads it later. wandb is an optional extra (`pip install duorl[wandb]`), imported only here; the
config check (config/extras.py) has already refused training.wandb=true without it.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from duorl.config.errors import ConfigError


class WandbSink:
    def __init__(self, run_dir: Path, config: dict[str, Any]) -> None:
        import wandb  # the optional extra

        training = config["training"]
        run_dir = Path(run_dir)
        try:
            self._run = wandb.init(
                project=training["wandb_project"],
                mode=training["wandb_mode"],
                name=run_dir.name,
                dir=str(run_dir),
                config=config,
                # the run directory is the run's identity: a resume writes a new one, so a new W&B run
                resume="never",
            )
        except Exception as e:  # noqa: BLE001 - wandb raises many kinds (auth, network, usage)
            # a ConfigError: `duorl train` prints it as one line and exits 2, as for any refused setting
            first = (str(e).strip().splitlines() or [type(e).__name__])[0].rstrip(".")
            mode = training["wandb_mode"]
            raise ConfigError("training.wandb_mode", mode, f"wandb.init failed ({first})", "online with a W&B "
                              "login, or offline", "run `wandb login` (or set WANDB_API_KEY), or set "
                              "training.wandb_mode=offline (no network needed)") from None

    def log(self, env_steps: int, values: dict[str, float]) -> None:
        # TensorBoard drops non-finite values too: the three sinks hold the same points
        finite = {k: v for k, v in values.items() if math.isfinite(v)}
        self._run.log(finite, step=env_steps)

    def close(self) -> None:
        self._run.finish()
