"""What the SAC-family learners (sac, flashsac/warpsac) share verbatim: the tanh-Gaussian squash, the
optimizer reload that keeps device learning-rate tensors, and the small learner helpers below."""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

import torch

from duorl.algos.capture import CycleCaptureMixin
from duorl.algos.sac.networks import tanh_gaussian_log_prob


def squash(mean: torch.Tensor, log_std: torch.Tensor, noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Reparameterised tanh-Gaussian sample and its log-density (the ops of the actors' forward)."""
    pre_tanh = mean + torch.exp(log_std) * noise
    return torch.tanh(pre_tanh), tanh_gaussian_log_prob(pre_tanh, mean, log_std)


def load_optimizer(optimizer: torch.optim.Optimizer, state: dict) -> None:
    """Optimizer.load_state_dict swaps in the saved lr object (a CPU tensor after
    torch.load(map_location="cpu")); keep our device lr tensors and copy the values into them."""
    lrs = [group["lr"] for group in optimizer.param_groups]
    optimizer.load_state_dict(state)
    for group, lr in zip(optimizer.param_groups, lrs):
        lr.copy_(group["lr"])
        group["lr"] = lr


class SACFamilyLearner(CycleCaptureMixin):
    """Helpers over the attributes every SAC-family learner has: actor (with obs_norm), critic,
    critic_obs_norm, the three optimizers, and the flat target/online critic parameter lists."""

    actor: Any
    critic: torch.nn.Module
    critic_obs_norm: Any
    actor_optimizer: torch.optim.Optimizer
    critic_optimizer: torch.optim.Optimizer
    alpha_optimizer: torch.optim.Optimizer
    _target_params: list[torch.Tensor]
    _critic_params: list[torch.Tensor]

    @torch.no_grad()
    def observe(self, obs_actor: torch.Tensor, obs_critic: torch.Tensor) -> None:
        if self.actor.obs_norm is not None:
            self.actor.obs_norm.update(obs_actor)
        if self.critic_obs_norm is not None:
            self.critic_obs_norm.update(obs_critic)

    def graph_optimizers(self) -> list[torch.optim.Optimizer]:
        return [self.actor_optimizer, self.critic_optimizer, self.alpha_optimizer]

    @contextlib.contextmanager
    def _critic_frozen(self) -> Iterator[None]:
        # the actor loss backpropagates through the critic to the action only; freezing the critic's
        # parameters skips their weight gradients (and leaves the critic's .grad untouched)
        self.critic.requires_grad_(False)
        try:
            yield
        finally:
            self.critic.requires_grad_(True)

    def _normalize_critic_obs(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic_obs_norm(obs) if self.critic_obs_norm is not None else obs

    @torch.no_grad()
    def _update_targets(self) -> None:
        torch._foreach_lerp_(self._target_params, self._critic_params, self.cfg.tau)
