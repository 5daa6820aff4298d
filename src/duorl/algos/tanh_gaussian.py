"""The tanh-Gaussian policy head the SAC-family actors share: a = tanh(u), u ~ N(mean, exp(log_std)).

The actors differ only in their trunk and in where the exploration noise comes from (FastSAC draws
it fresh every step, FlashSAC holds it for several steps); the squash of the raw log-std into its
range, the reparameterised sample with its log-density, and the explore/act entry points the collector
calls are written once here.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from duorl.algos.base import Policy

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
_LOG_2 = math.log(2.0)


def tanh_gaussian_log_prob(pre_tanh: torch.Tensor, mean: torch.Tensor, log_std: torch.Tensor) -> torch.Tensor:
    """log density of a = tanh(u), u ~ N(mean, exp(log_std)), summed over the last dim.

    Uses log(1 - tanh(u)^2) = 2*(log 2 - u - softplus(-2u)), which stays finite where tanh saturates
    (the naive form gives log(0) = -inf once |u| > ~9 in float32).
    """
    z = (pre_tanh - mean) * torch.exp(-log_std)
    gaussian = -0.5 * z.square() - log_std - _HALF_LOG_2PI
    log_det = 2.0 * (_LOG_2 - pre_tanh - F.softplus(-2.0 * pre_tanh))
    return (gaussian - log_det).sum(-1)


def squash(mean: torch.Tensor, log_std: torch.Tensor, noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Reparameterised tanh-Gaussian sample with `noise` ~ N(0, 1) and its log-density."""
    pre_tanh = mean + torch.exp(log_std) * noise
    return torch.tanh(pre_tanh), tanh_gaussian_log_prob(pre_tanh, mean, log_std)


class TanhGaussianPolicy(Policy):
    """pi(a|s) = tanh(N(mean(s), exp(log_std(s)))), actions in [-1, 1], for an nn.Module actor.

    The actor provides `distribution_params` (its trunk and heads) and keeps `log_std_min` and
    `log_std_max`; it may override `exploration_noise` (default: fresh N(0, 1) from the generator).
    """

    log_std_min: float
    log_std_max: float

    def distribution_params(self, obs_actor: torch.Tensor, training: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """(mean, log_std) of the pre-tanh Gaussian, float32; `training`: the learner's mode (networks
        with batch statistics normalise with the batch)."""
        raise NotImplementedError

    def log_std_from(self, raw: torch.Tensor) -> torch.Tensor:
        """The log-std head's output squashed into [log_std_min, log_std_max] by tanh (a hard clamp would
        zero the gradient at the bounds)."""
        return self.log_std_min + 0.5 * (self.log_std_max - self.log_std_min) * (torch.tanh(raw) + 1.0)

    def exploration_noise(self, mean: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        """The standard normal noise `explore` adds before the squash."""
        return torch.randn(mean.shape, generator=generator, device=mean.device, dtype=mean.dtype)

    def forward(
        self, obs_actor: torch.Tensor, generator: torch.Generator | None = None, training: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Reparameterised sample for the learner: (action, log_prob [B], mean_action = tanh(mean))."""
        mean, log_std = self.distribution_params(obs_actor, training)
        noise = torch.randn(mean.shape, generator=generator, device=mean.device, dtype=mean.dtype)
        action, log_prob = squash(mean, log_std, noise)
        return action, log_prob, torch.tanh(mean)

    @torch.no_grad()
    def explore(self, obs_actor: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        """Stochastic action in [-1, 1]; deterministic given the generator's state (and held noise)."""
        return self.explore_with_mean(obs_actor, generator)[0]

    @torch.no_grad()
    def explore_with_mean(self, obs_actor: torch.Tensor,
                          generator: torch.Generator | None) -> tuple[torch.Tensor, torch.Tensor]:
        """(the stochastic action `explore` returns, the policy's own output tanh(mean) behind it)."""
        mean, log_std = self.distribution_params(obs_actor, training=False)
        noise = self.exploration_noise(mean, generator)
        return torch.tanh(mean + torch.exp(log_std) * noise), torch.tanh(mean)

    @torch.no_grad()
    def act(self, obs_actor: torch.Tensor) -> torch.Tensor:
        """Deterministic action tanh(mean) in [-1, 1]."""
        mean, _ = self.distribution_params(obs_actor, training=False)
        return torch.tanh(mean)
