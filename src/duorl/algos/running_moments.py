"""The pooled merge of a batch's mean and variance into running ones (Chan et al.), in place.

The observation normaliser (sac/normalizer.py) and FlashSAC's return scale (flashsac/reward_scale.py)
keep running statistics this way; both merge inside a learner iteration's device work, so nothing here
reads a value back to the host: the batch size is a Python int and the count a float64 device tensor.
"""

from __future__ import annotations

import torch


@torch.no_grad()
def merge_moments_(mean: torch.Tensor, var: torch.Tensor, count: torch.Tensor, n_batch: int,
                   batch_mean: torch.Tensor, batch_var: torch.Tensor) -> None:
    """Merge a batch of `n_batch` samples (its mean and population variance) into the running `mean`,
    `var` (population) and `count` (a 0-d float64 tensor, exact far beyond 2**24 samples)."""
    total = count + n_batch
    # fraction of the merged sample that the new batch represents ([] tensor, no host sync)
    w = (n_batch / total).to(mean.dtype)
    delta = batch_mean - mean
    mean.add_(delta * w)
    # var = var_a*(1-w) + var_b*w + delta^2*w*(1-w): the pooled second moment about the new mean
    var.mul_(1.0 - w).add_(batch_var * w).add_(delta.square() * (w * (1.0 - w)))
    count.copy_(total)
