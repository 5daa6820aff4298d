"""Exploration noise held for zeta-distributed numbers of steps (FlashSAC).

Each environment keeps one standard-normal noise vector for n steps, n ~ Zeta(mu) truncated to
[1, n_max] (P(n) proportional to n^-mu), then draws a new vector and a new hold. Held noise gives
temporally coherent exploration; the heavy tail of the zeta law mixes short jitter with long pushes.

The per-env state (current noise, steps left) belongs to the collector's copy of the actor and never
travels on the weight board: it is a plain attribute, outside every state_dict. Every call draws the
same amount from the generator whichever envs re-draw, so the stream is deterministic given the seed
and the call is free of host syncs (it can live in a CUDA-graph tick).
"""

from __future__ import annotations

import torch


def truncated_zeta_pmf(mu: float, n_max: int) -> torch.Tensor:
    """P(n) for n = 1..n_max, float64."""
    n = torch.arange(1, n_max + 1, dtype=torch.float64)
    p = n.pow(-float(mu))
    return p / p.sum()


def sample_hold_lengths(cdf: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Inverse-CDF draws: hold lengths in [1, len(cdf)] (int64) for uniforms u in [0, 1)."""
    idx = torch.searchsorted(cdf, u.to(cdf.dtype), right=True)
    return idx.clamp_(max=cdf.numel() - 1) + 1


class HeldNoise:
    """Per-env held Gaussian noise; lazily sized from the first call."""

    def __init__(self, mu: float, n_max: int) -> None:
        if n_max < 1:
            raise ValueError(f"noise hold n_max must be >= 1, got {n_max}")
        self.mu, self.n_max = float(mu), int(n_max)
        self.cdf: torch.Tensor | None = None
        self.noise: torch.Tensor | None = None  # [N, A]
        self.remaining: torch.Tensor | None = None  # [N] int64 steps left with the current noise

    def _init(self, shape: torch.Size, device: torch.device, dtype: torch.dtype) -> None:
        cdf = truncated_zeta_pmf(self.mu, self.n_max).cumsum(0)
        cdf[-1] = 1.0  # exact top: u < 1 always lands inside
        self.cdf = cdf.to(device)
        self.noise = torch.zeros(shape, device=device, dtype=dtype)
        self.remaining = torch.zeros(shape[0], dtype=torch.int64, device=device)

    def __call__(self, shape: torch.Size, device: torch.device, dtype: torch.dtype, generator: torch.Generator | None) -> torch.Tensor:
        """The noise for this step, [N, A]; envs whose hold ran out draw anew."""
        if self.noise is None or self.noise.shape != shape or self.noise.device != device:
            self._init(shape, device, dtype)
        assert self.cdf is not None and self.noise is not None and self.remaining is not None
        fresh = torch.randn(shape, generator=generator, device=device, dtype=dtype)
        u = torch.rand(shape[0], generator=generator, device=device, dtype=torch.float64)
        hold = sample_hold_lengths(self.cdf, u)
        redraw = self.remaining <= 0
        self.noise.copy_(torch.where(redraw.unsqueeze(-1), fresh, self.noise))
        self.remaining.copy_(torch.where(redraw, hold, self.remaining) - 1)
        return self.noise

    def state(self) -> dict[str, torch.Tensor]:
        if self.noise is None or self.remaining is None:
            return {}
        return {"noise": self.noise.clone(), "remaining": self.remaining.clone()}

    def load_state(self, state: dict[str, torch.Tensor]) -> None:
        if not state:
            self.noise = self.remaining = None
            return
        noise = state["noise"]
        self._init(noise.shape, noise.device, noise.dtype)
        assert self.noise is not None and self.remaining is not None
        self.noise.copy_(noise)
        self.remaining.copy_(state["remaining"].to(self.remaining.device))
