"""Reward scaling by the running scale of the discounted return (FlashSAC).

Per env the learner follows the discounted return so far, G <- gamma * (1 - done) * G + r (the
convention of gymnasium's NormalizeReward: `done` is that of the transition just added), and keeps
a running variance of all G values and their largest magnitude |G|max. Rewards are divided by

    scale = max(sqrt(var(G) + eps), |G|max / g_max)

so normalised returns have about unit spread and never exceed g_max in magnitude: the categorical
critic's support [-g_max, g_max] then covers them whatever the task's reward units.

The statistics are buffers, updated in place from the ticks the collector wrote (`observe`, eager,
between iterations); `scale()` only reads them, so a captured iteration picks up new values. The per-env
returns G are observe's alone: kept outside the buffers (saved as the module's extra state), so sizing
them at the first observe leaves a graph captured before it (the duo's first update, captured while
the collector starts) valid.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from duorl.algos.running_moments import merge_moments_


class ReturnScale(nn.Module):
    def __init__(self, gamma: float, g_max: float, eps: float = 1e-8) -> None:
        super().__init__()
        self.gamma, self.g_max, self.eps = float(gamma), float(g_max), float(eps)
        self.returns = torch.zeros(0)  # [num_envs], sized (on the statistics' device) by the first observe
        self.register_buffer("mean", torch.zeros(()))
        self.register_buffer("var", torch.ones(()))
        self.register_buffer("max_abs", torch.zeros(()))
        # float64 so the count stays exact far beyond 2**24 env steps
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))

    @torch.no_grad()
    def observe(self, reward: torch.Tensor, done: torch.Tensor,
                gather: Callable[[torch.Tensor], torch.Tensor] | None = None) -> None:
        """Rewards and done flags of consecutive ticks, [T, num_envs] each, oldest first. With `gather`
        (a synchronizer's: rows of every rank in rank order) the envs of every rank are followed, in
        rank order, so all ranks hold the same statistics."""
        reward = reward.reshape(-1, reward.shape[-1]).to(self.mean.dtype)
        done = done.reshape(reward.shape).to(self.mean.dtype)
        if gather is not None:
            both = gather(torch.stack((reward, done)).transpose(0, 2).contiguous())  # [ranks * envs, T, 2]
            reward, done = both.transpose(0, 2).unbind(0)
        if self.returns.shape != reward.shape[1:] or self.returns.device != self.mean.device:
            self.returns = torch.zeros(reward.shape[1:], device=self.mean.device)
        for r, d in zip(reward, done):
            g = self.returns.mul_(self.gamma * (1.0 - d)).add_(r)
            torch.maximum(self.max_abs, g.abs().max(), out=self.max_abs)
            batch_var, batch_mean = torch.var_mean(g, unbiased=False)
            merge_moments_(self.mean, self.var, self.count, g.numel(), batch_mean, batch_var)

    def get_extra_state(self) -> dict[str, torch.Tensor]:
        return {"returns": self.returns}

    def set_extra_state(self, state: dict[str, torch.Tensor]) -> None:
        self.returns = state["returns"].to(self.mean.device, copy=True)

    def scale(self) -> torch.Tensor:
        """The divisor for rewards, a 0-d tensor (1 before any observation)."""
        return torch.maximum(torch.sqrt(self.var + self.eps), self.max_abs / self.g_max)

    def forward(self, reward: torch.Tensor) -> torch.Tensor:
        return reward / self.scale()
