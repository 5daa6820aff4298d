"""Metrics rows written one row late, so that a row never makes the learner wait for the GPU.

With the event publish (runtime/weights.py) nothing in a learner iteration waits for the update it queued,
except a metrics row: its train time (CUDA events) and the learner's losses are device results. So a row is
taken in two parts: the host part at once (`IterationMetrics.host_row`: timings, the collector's statistics),
the device part as one copy into pinned host memory queued behind the update, with an event after it. The
row is written when the next row is taken, when the loop ends, or before a checkpoint: by then its event is
long done, so reading it waits for nothing in the common case. The values are the same as a synced row's.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from duorl.runtime.iteration_metrics import HostRow
from duorl.runtime.timing import PhaseTimes


@dataclass(frozen=True)
class Row:
    """One metrics row to write: after `iteration` iterations, `env_steps` env steps, `wall_s` into the run."""

    iteration: int
    env_steps: int
    wall_s: float
    metrics: dict[str, float]


@dataclass(frozen=True)
class _Pending:
    iteration: int
    env_steps: int
    wall_s: float
    host: HostRow
    times: PhaseTimes
    keys: tuple[str, ...]
    done: torch.cuda.Event


class DeferredRows:
    """At most one row in flight on a CUDA device: `queue` takes a row and returns the one before it, read."""

    def __init__(self) -> None:
        self._values: torch.Tensor | None = None  # pinned, float64: one slot per learner metric
        self._pending: _Pending | None = None

    def queue(self, iteration: int, env_steps: int, wall_s: float, host: HostRow, times: PhaseTimes,
              learner_metrics: dict[str, torch.Tensor]) -> list[Row]:
        """Take this row (its device part queued on the current stream); the rows now written (the one before)."""
        written = self.flush()  # before the copy below reuses the buffer
        keys = tuple(learner_metrics)
        if keys:
            values = torch.stack([v.detach().reshape(()).to(torch.float64) for v in learner_metrics.values()])
            if self._values is None or self._values.numel() != len(keys):
                self._values = torch.empty(len(keys), dtype=torch.float64, pin_memory=True)
            self._values.copy_(values, non_blocking=True)
        done = torch.cuda.Event()
        done.record()
        self._pending = _Pending(iteration, env_steps, wall_s, host, times, keys, done)
        return written

    def flush(self) -> list[Row]:
        """The row in flight, read (waits for its event), or nothing."""
        p, self._pending = self._pending, None
        if p is None:
            return []
        p.done.synchronize()
        values = dict(zip(p.keys, self._values.tolist())) if p.keys and self._values is not None else {}
        return [Row(p.iteration, p.env_steps, p.wall_s, p.host.finish(p.times.ms().get("learner_train_ms"), values))]
