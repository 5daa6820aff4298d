"""Running observation normaliser kept as module buffers.

The statistics live in buffers (not parameters) so they travel in a module's state_dict, are never
touched by an optimizer, and can be updated in place inside a CUDA graph.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from duorl.algos.running_moments import merge_moments_


class RunningObsNormalizer(nn.Module):
    """Per-feature running mean and (population) variance, merged batch by batch (running_moments.py).

    `update` never reads a value back to the host: the batch size is a Python int from the shape and
    every statistic is combined in place on the tensors' device.
    """

    def __init__(self, dim: int, eps: float = 1e-2) -> None:
        super().__init__()
        # eps is added to the std (not the variance): constant features (a fixed command, a phase that
        # never moves) then map to ~0 instead of amplifying rounding noise by 1/sqrt(tiny).
        self.eps = eps
        self.register_buffer("mean", torch.zeros(dim))
        self.register_buffer("var", torch.ones(dim))
        # float64 so the sample count stays exact far beyond 2**24 transitions
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))

    @torch.no_grad()
    def update(self, x: torch.Tensor, gather: Callable[[torch.Tensor], torch.Tensor] | None = None) -> None:
        """Merge a batch x [N, dim] into the running statistics. With `gather` (a synchronizer's: every
        rank's rows in rank order), every rank's batch statistics are merged in rank order, so all ranks
        hold the same statistics (every rank's N is the same)."""
        dim = self.mean.shape[0]
        x = x.reshape(-1, dim).to(self.mean.dtype)
        n_batch = x.shape[0]
        batch_var, batch_mean = torch.var_mean(x, dim=0, unbiased=False)
        if gather is None:
            merge_moments_(self.mean, self.var, self.count, n_batch, batch_mean, batch_var)
            return
        stats = gather(torch.cat((batch_mean, batch_var)).unsqueeze(0))
        for row in stats:
            merge_moments_(self.mean, self.var, self.count, n_batch, row[:dim], row[dim:])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) / (self.var.sqrt() + self.eps)
