"""The pooled mean/variance merge equals the moments of all samples at once."""

from __future__ import annotations

import torch

from duorl.algos.running_moments import merge_moments_


def test_merging_batches_gives_the_moments_of_their_union() -> None:
    g = torch.Generator().manual_seed(0)
    batches = [torch.randn(n, 3, generator=g, dtype=torch.float64) * 2.0 + 5.0 for n in (7, 1, 64, 13)]
    mean, var, count = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64), torch.zeros((), dtype=torch.float64)
    for b in batches:
        batch_var, batch_mean = torch.var_mean(b, dim=0, unbiased=False)
        merge_moments_(mean, var, count, b.shape[0], batch_mean, batch_var)
    every = torch.cat(batches)
    all_var, all_mean = torch.var_mean(every, dim=0, unbiased=False)
    torch.testing.assert_close(mean, all_mean, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(var, all_var, rtol=1e-12, atol=1e-12)
    assert count.item() == every.shape[0]
