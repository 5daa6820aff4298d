"""The Learner protocol: what the runtime needs from an algorithm, and nothing more."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

import torch
from torch import nn


@dataclass
class Batch:
    """One sampled minibatch of transitions, all on the learner's device."""

    obs_actor: torch.Tensor  # [B, actor_obs_dim] float32
    obs_critic: torch.Tensor  # [B, critic_obs_dim] float32
    action: torch.Tensor  # [B, action_dim] float32 in [-1, 1]
    reward: torch.Tensor  # [B] float32
    next_obs_actor: torch.Tensor  # [B, actor_obs_dim]
    next_obs_critic: torch.Tensor  # [B, critic_obs_dim]
    terminated: torch.Tensor  # [B] float32: 1.0 where the episode ended without bootstrap


SampleFn = Callable[[int], Batch]


class Policy(Protocol):
    """The actor the collector runs: an nn.Module whose state_dict travels on the weight board."""

    def explore(self, obs_actor: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        """Stochastic action in [-1, 1] for exploration."""

    def act(self, obs_actor: torch.Tensor) -> torch.Tensor:
        """Deterministic action in [-1, 1] for evaluation."""


class Learner(Protocol):
    actor: nn.Module  # implements Policy; its state_dict (params + buffers) is what gets published

    def observe(self, obs_actor: torch.Tensor, obs_critic: torch.Tensor) -> None:
        """New observations arrived (for running normalisers); no host sync."""

    def train_iteration(self, sample: SampleFn, num_updates: int) -> dict[str, torch.Tensor]:
        """Run `num_updates` updates on batches from `sample(batch_size)`. Returns scalar device tensors
        keyed by canonical metric names (`Loss/...`, `Policy/...`); no host sync."""

    def state_dict(self) -> dict: ...

    def load_state_dict(self, state: dict) -> None: ...


class RewardObserver(Protocol):
    """Optional: a learner that follows rewards per env (FlashSAC's reward scaling) also gets, after
    `observe`, the rewards and episode ends (terminated or truncated) of the new ticks, in tick order."""

    def observe_rewards(self, reward: torch.Tensor, done: torch.Tensor) -> None:
        """reward, done: [ticks, num_envs] float32 on the learner's device; no host sync."""
