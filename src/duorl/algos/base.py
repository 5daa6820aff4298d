"""The Learner protocol: what the runtime needs from an algorithm, and nothing more."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Hashable, Mapping, Protocol, Sequence

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


class Policy:
    """The actor the collector runs: an nn.Module whose state_dict travels on the weight board. Actors
    subclass it beside nn.Module, so that its optional hooks (no-op defaults) exist on every actor."""

    def explore(self, obs_actor: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        """Stochastic action in [-1, 1] for exploration."""
        raise NotImplementedError

    def act(self, obs_actor: torch.Tensor) -> torch.Tensor:
        """Deterministic action in [-1, 1] for evaluation."""
        raise NotImplementedError

    # -- optional hooks (no-op defaults) -------------------------------------------------------------
    def exploration_state(self) -> dict[str, torch.Tensor] | None:
        """State exploration carries from tick to tick (FlashSAC's held noise), kept in the collector's
        exact-resume snapshot (runtime/collector.py); None: it carries none."""
        return None

    def load_exploration_state(self, state: dict[str, torch.Tensor]) -> None:
        """Restore what exploration_state() returned."""
        return None


class Learner(Protocol):
    """What the runtime calls on an algorithm. Learners subclass it explicitly, so that the optional
    hooks below (with no-op defaults) exist on every learner and the runtime calls them unconditionally."""

    actor: nn.Module  # implements Policy; its state_dict (params + buffers) is what gets published
    # state_dict entries computed from this rank's own batches (reported metrics, not training state):
    # under data parallel they may differ between ranks while everything else is bitwise equal
    rank_local_state: tuple[str, ...] = ()
    # bumped by load_state_dict when a captured CUDA graph of the learner becomes stale
    state_generation: int = 0

    def observe(self, obs_actor: torch.Tensor, obs_critic: torch.Tensor) -> None:
        """New observations arrived (for running normalisers); no host sync."""

    def train_iteration(self, sample: SampleFn, num_updates: int) -> dict[str, torch.Tensor]:
        """Run `num_updates` updates on batches from `sample(batch_size)`. Returns scalar device tensors
        keyed by canonical metric names (`Loss/...`, `Policy/...`); no host sync."""

    def state_dict(self) -> dict: ...

    def load_state_dict(self, state: dict) -> None: ...

    # -- optional hooks (no-op defaults) -------------------------------------------------------------
    def observe_rewards(self, reward: torch.Tensor, done: torch.Tensor) -> None:
        """After `observe`: the rewards and episode ends (terminated or truncated) of the new ticks, in
        tick order, for a learner that follows rewards per env (FlashSAC's reward scaling).
        reward, done: [ticks, num_envs] float32 on the learner's device; no host sync."""
        return None

    def cycle_key(self, num_updates: int) -> Hashable:
        """Equal for two update cycles that take the same Python path (torch.compile and a whole-cycle
        graph compile or capture one per key); None: every cycle is alike."""
        return None


class GradientSynchronizer(Protocol):
    """Where a learner's optimizer groups meet the other ranks (docs/design.md §4).

    The learner names its groups once (`attach`, stable names and parameter lists), then between
    backward and clip/step hands each group and its loss to `synchronize`, which may rewrite the
    group's gradients in place (data parallel: their average over ranks) and returns a verdict: a 0-d
    float32 device tensor, 1.0 to apply the step (and, for the critic, the target update) and 0.0 to
    skip it, or None to always apply it. Running statistics (observation normalisers, reward scale)
    go through `gather`, so every rank merges the same data in the same order. No method reads a
    device value on the host: all of it can be captured in a CUDA graph.
    """

    def attach(self, groups: Mapping[str, Sequence[nn.Parameter]], buffers: Sequence[torch.Tensor] = ()) -> None:
        """Called once, before any update, with every group the learner will synchronize, and the
        running-statistics buffers its forward passes update from the local batch (BatchNorm)."""

    def synchronize(self, group: str, loss: torch.Tensor) -> torch.Tensor | None: ...

    def average_buffers(self) -> None:
        """Replace the attached buffers by their mean over ranks (end of an iteration). Each rank's
        buffers followed the same linear running-average recurrence from the same start, so the mean
        equals that recurrence over the ranks' averaged batch statistics."""

    def gather(self, x: torch.Tensor) -> torch.Tensor:
        """Every rank's `x` (same shape on each), concatenated along dim 0 in rank order."""

    def fingerprint(self) -> Hashable:
        """Changes whenever what `synchronize` launches changes (a captured graph is then stale)."""


class NullSynchronizer:
    """One process without peers: gradients stay as they are and every step is applied."""

    world_size = 1

    def attach(self, groups: Mapping[str, Sequence[nn.Parameter]], buffers: Sequence[torch.Tensor] = ()) -> None:
        return None

    def synchronize(self, group: str, loss: torch.Tensor) -> torch.Tensor | None:
        return None

    def average_buffers(self) -> None:
        return None

    def gather(self, x: torch.Tensor) -> torch.Tensor:
        return x

    def fingerprint(self) -> Hashable:
        return ("null",)


@dataclass(frozen=True)
class NetworkSize:
    """A network's size, counted from the configuration (algos/sizes.py) for the memory check."""

    params: int  # trained floats
    state: int  # everything in the state_dict: parameters and buffers (normaliser statistics, supports)
    outputs_per_sample: int  # floats the linear maps and norms output for one sample in one forward pass
