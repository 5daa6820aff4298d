"""Linear warm-up then cosine decay of the learning rate, computed on the device.

The update counter is a device tensor and the factor is written into the optimizers' (device) lr
tensors with copy_, so the schedule advances inside a captured CUDA graph exactly as it does eagerly.
"""

from __future__ import annotations

import math

import torch
from torch import nn


class WarmupCosine(nn.Module):
    """factor(t) for update t = 0, 1, ...:

    - t < warmup:  (t + 1) / warmup                               (linear ramp; no update at lr 0)
    - after:       end + (1 - end) * (1 + cos(pi * p)) / 2,  p = min(1, (t - warmup) / decay)

    so the rate falls from the peak to `end_ratio` times it over `decay_updates` updates and stays there.
    """

    def __init__(self, warmup_updates: int, decay_updates: int, end_ratio: float) -> None:
        super().__init__()
        self.warmup = max(int(warmup_updates), 0)
        self.decay = max(int(decay_updates), 1)
        self.end_ratio = float(end_ratio)
        # float64: exact counting far beyond 2**24 updates
        self.register_buffer("step", torch.zeros((), dtype=torch.float64))

    def factor(self) -> torch.Tensor:
        t = self.step
        progress = ((t - self.warmup) / self.decay).clamp(0.0, 1.0)
        cosine = self.end_ratio + (1.0 - self.end_ratio) * 0.5 * (1.0 + torch.cos(math.pi * progress))
        if self.warmup == 0:
            return cosine
        return torch.where(t < self.warmup, (t + 1.0) / self.warmup, cosine)

    @torch.no_grad()
    def apply_(self, lrs: list[tuple[torch.Tensor, float]]) -> torch.Tensor:
        """Write peak * factor into each lr tensor; returns the factor."""
        f = self.factor()
        for lr, peak in lrs:
            lr.copy_(f * peak)
        return f

    @torch.no_grad()
    def advance_(self) -> None:
        self.step.add_(1.0)


def factor_reference(t: int, warmup: int, decay: int, end_ratio: float) -> float:
    """The same schedule in plain Python (tests)."""
    if t < warmup:
        return (t + 1) / warmup
    p = min(1.0, max(0.0, (t - warmup) / max(decay, 1)))
    return end_ratio + (1.0 - end_ratio) * 0.5 * (1.0 + math.cos(math.pi * p))
