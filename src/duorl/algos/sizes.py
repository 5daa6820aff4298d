"""Network sizes from the configuration alone, for the memory check before anything is built.

Each learner family writes down its actor's and critic's layers here in the order its networks build
them (sac/networks.py, flashsac/networks.py and layers.py); `tests/algos/test_sizes.py` builds the
real networks for several configurations and checks every count, so the two cannot drift apart.
Counting costs nothing, where building even on PyTorch's meta device costs a second of first-call
kernel setup on each run's start.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from duorl.config.schema import AlgoConfig
    from duorl.envs.base import EnvSpec


@dataclass(frozen=True)
class NetworkSize:
    params: int  # trained floats
    state: int  # everything in the state_dict: parameters and buffers (normaliser statistics, supports)
    outputs_per_sample: int  # floats the linear maps and norms output for one sample in one forward pass


class _Tally:
    def __init__(self) -> None:
        self.params = self.buffers = self.outputs = 0

    def linear(self, n_in: int, n_out: int, bias: bool = True, members: int = 1) -> None:
        self.params += members * (n_in * n_out + (n_out if bias else 0))
        self.outputs += members * n_out

    def norm(self, dim: int, members: int = 1, affine: int = 2, stats: int = 0) -> None:
        """A norm with `affine` learned vectors (LayerNorm, BatchNorm: 2; RMSNorm: 1) and `stats` running ones."""
        self.params += members * dim * affine
        self.buffers += members * dim * stats
        self.outputs += members * dim

    def normalizer(self, dim: int, enabled: bool) -> None:
        """RunningObsNormalizer's buffers: mean, var and a count."""
        self.buffers += 2 * dim + 1 if enabled else 0

    def size(self) -> NetworkSize:
        return NetworkSize(self.params, self.params + self.buffers, self.outputs)


def sac_sizes(cfg: AlgoConfig, spec: EnvSpec, members: int = 2) -> tuple[NetworkSize, NetworkSize]:
    """TanhGaussianActor and CategoricalCriticEnsemble (Linear -> LayerNorm -> SiLU blocks)."""
    actor = _Tally()
    actor.normalizer(spec.actor_obs_dim, cfg.obs_normalization)
    width = spec.actor_obs_dim
    for w in cfg.actor_hidden_dims:
        actor.linear(width, w)
        actor.norm(w)
        width = w
    for _head in ("mean", "log_std"):
        actor.linear(width, spec.action_dim)
    critic = _Tally()
    width = spec.critic_obs_dim + spec.action_dim
    for w in cfg.critic_hidden_dims:
        critic.linear(width, w, members=members)
        critic.norm(w, members=members)
        width = w
    critic.linear(width, cfg.num_atoms, members=members)
    critic.buffers += cfg.num_atoms  # the return support
    return actor.size(), critic.size()


def _trunk(t: _Tally, n_in: int, hidden: int, blocks: int, expansion: int, members: int = 1) -> None:
    """flashsac/layers.Trunk: input BatchNorm and a unit linear map, inverted-residual blocks, RMSNorm."""
    t.norm(n_in, members, stats=2)
    t.linear(n_in, hidden, bias=False, members=members)
    for _ in range(blocks):
        t.linear(hidden, hidden * expansion, bias=False, members=members)
        t.norm(hidden * expansion, members, stats=2)
        t.linear(hidden * expansion, hidden, bias=False, members=members)
        t.norm(hidden, members, stats=2)
    t.norm(hidden, members, affine=1)


def flashsac_sizes(cfg: AlgoConfig, spec: EnvSpec, members: int = 2) -> tuple[NetworkSize, NetworkSize]:
    """FlashSACActor and FlashSACCritic."""
    actor = _Tally()
    actor.normalizer(spec.actor_obs_dim, cfg.obs_normalization)
    _trunk(actor, spec.actor_obs_dim, cfg.actor_hidden_dim, cfg.actor_num_blocks, cfg.block_expansion)
    for _head in ("mean", "log_std"):
        actor.linear(cfg.actor_hidden_dim, spec.action_dim, bias=False)
        actor.params += spec.action_dim  # the head's bias, a parameter of the actor
    critic = _Tally()
    _trunk(critic, spec.critic_obs_dim + spec.action_dim, cfg.critic_hidden_dim, cfg.critic_num_blocks,
           cfg.block_expansion, members)
    critic.linear(cfg.critic_hidden_dim, cfg.num_atoms, bias=False, members=members)
    critic.params += members * cfg.num_atoms  # head_bias
    critic.buffers += cfg.num_atoms  # the return support
    return actor.size(), critic.size()
