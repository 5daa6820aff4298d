"""metrics.jsonl, TensorBoard and (training.wandb=true) Weights & Biases, written together so they never
disagree.

Only the process that owns the run directory creates a MetricsWriter (rank 0 under data parallel), so
every sink, W&B included, is written once per run.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any


def _run_config(run_dir: Path) -> dict[str, Any]:
    """The run's resolved config (run_config.json, written before any writer exists); {} without one."""
    path = run_dir / "run_config.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


class MetricsWriter:
    def __init__(self, run_dir: Path, tensorboard: bool = True, config: dict[str, Any] | None = None) -> None:
        """`config`: the resolved config as a dict (default: the run directory's run_config.json); its
        training.wandb switches the W&B sink on."""
        run_dir = Path(run_dir)
        self.path = run_dir / "metrics.jsonl"
        config = _run_config(run_dir) if config is None else config
        self._file = open(self.path, "a", buffering=1, encoding="utf-8")
        self._tb = None
        self._wandb = None
        if tensorboard:
            # imported lazily: TensorBoard's writer pulls in a lot and is only needed by the learner
            from torch.utils.tensorboard import SummaryWriter

            self._tb = SummaryWriter(log_dir=str(run_dir / "tensorboard"))
        if config.get("training", {}).get("wandb"):
            from duorl.telemetry.wandb_sink import WandbSink

            self._wandb = WandbSink(run_dir, config)

    def write(self, iteration: int, env_steps: int, wall_s: float, values: dict[str, float]) -> None:
        row: dict[str, Any] = {"iteration": iteration, "env_steps": env_steps, "wall_s": round(wall_s, 4)}
        for k, v in values.items():
            row[k] = v if math.isfinite(v) else None
        self._file.write(json.dumps(row) + "\n")
        if self._tb is not None:
            for k, v in values.items():
                if math.isfinite(v):
                    self._tb.add_scalar(k, v, global_step=env_steps)
        if self._wandb is not None:
            self._wandb.log(env_steps, values)

    def close(self) -> None:
        self._file.close()
        if self._tb is not None:
            self._tb.flush()
            self._tb.close()
        if self._wandb is not None:
            self._wandb.close()
