"""metrics.jsonl and TensorBoard, written together so the two never disagree."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any


class MetricsWriter:
    def __init__(self, run_dir: Path, tensorboard: bool = True) -> None:
        self.path = Path(run_dir) / "metrics.jsonl"
        self._file = open(self.path, "a", buffering=1, encoding="utf-8")
        self._tb = None
        if tensorboard:
            # imported lazily: TensorBoard's writer pulls in a lot and is only needed by the learner
            from torch.utils.tensorboard import SummaryWriter

            self._tb = SummaryWriter(log_dir=str(Path(run_dir) / "tensorboard"))

    def write(self, iteration: int, env_steps: int, wall_s: float, values: dict[str, float]) -> None:
        row: dict[str, Any] = {"iteration": iteration, "env_steps": env_steps, "wall_s": round(wall_s, 4)}
        for k, v in values.items():
            row[k] = v if math.isfinite(v) else None
        self._file.write(json.dumps(row) + "\n")
        if self._tb is not None:
            for k, v in values.items():
                if math.isfinite(v):
                    self._tb.add_scalar(k, v, global_step=env_steps)

    def close(self) -> None:
        self._file.close()
        if self._tb is not None:
            self._tb.flush()
            self._tb.close()
