"""FlashSAC actor and twin categorical critic.

Both are inverted-residual trunks (layers.py) with input BatchNorm, so BatchNorm statistics are
part of each network: `training=True` normalises with the batch and updates running statistics,
`training=False` uses the running statistics (the collector always acts with them).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from duorl.algos.flashsac.layers import Trunk, UnitLinear, project_unit_norm
from duorl.algos.flashsac.noise import HeldNoise
from duorl.algos.sac.networks import CategoricalSupportMixin
from duorl.algos.sac.normalizer import RunningObsNormalizer
from duorl.algos.tanh_gaussian import TanhGaussianPolicy


class FlashSACActor(TanhGaussianPolicy, nn.Module):
    """pi(a|s) = tanh(N(mu(s), sigma(s))) on an inverted-residual trunk; actions in [-1, 1] (the head:
    algos/tanh_gaussian.py).

    Exploration (`explore`) holds its Gaussian noise for zeta-distributed numbers of steps per env.
    The held noise is collector-side state outside the state_dict (see noise.py).
    """

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        hidden_dim: int,
        num_blocks: int,
        expansion: int,
        log_std_min: float,
        log_std_max: float,
        obs_normalization: bool,
        noise_zeta_mu: float,
        noise_zeta_max: int,
    ) -> None:
        super().__init__()
        self.obs_norm = RunningObsNormalizer(obs_dim) if obs_normalization else None
        self.trunk = Trunk(obs_dim, hidden_dim, num_blocks, expansion)
        self.mean_head = UnitLinear(hidden_dim, action_dim)
        self.mean_bias = nn.Parameter(torch.zeros(action_dim))
        self.log_std_head = UnitLinear(hidden_dim, action_dim)
        self.log_std_bias = nn.Parameter(torch.zeros(action_dim))
        self.log_std_min = float(log_std_min)
        self.log_std_max = float(log_std_max)
        self.held_noise = HeldNoise(noise_zeta_mu, noise_zeta_max)

    def distribution_params(self, obs_actor: torch.Tensor, training: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """(mean, log_std) of the pre-tanh Gaussian, float32."""
        x = self.obs_norm(obs_actor) if self.obs_norm is not None else obs_actor
        h = self.trunk(x, training)
        mean = self.mean_head(h).float() + self.mean_bias
        return mean, self.log_std_from(self.log_std_head(h).float() + self.log_std_bias)

    def exploration_noise(self, mean: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        """Gaussian noise held for zeta-distributed numbers of steps per env (noise.py)."""
        return self.held_noise(mean.shape, mean.device, mean.dtype, generator)

    # the collector's exact-resume snapshot (runtime/collector.py)
    def exploration_state(self) -> dict[str, torch.Tensor]:
        return self.held_noise.state()

    def load_exploration_state(self, state: dict[str, torch.Tensor]) -> None:
        self.held_noise.load_state(state)

    def project_(self, apply: torch.Tensor | None = None) -> None:
        project_unit_norm(self, apply)


class FlashSACCritic(CategoricalSupportMixin, nn.Module):
    """`num_members` categorical critics Z_i(s, a) on support linspace(v_min, v_max, num_atoms).

    One batched network ([members, B, d] everywhere). Observations must be normalised already if the
    learner keeps a critic normaliser; the input BatchNorm normalises them anyway.
    """

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        hidden_dim: int,
        num_blocks: int,
        expansion: int,
        num_atoms: int,
        v_min: float,
        v_max: float,
        num_members: int = 2,
    ) -> None:
        super().__init__()
        self.num_members = num_members
        self.trunk = Trunk(obs_dim + action_dim, hidden_dim, num_blocks, expansion, members=num_members)
        self.head = UnitLinear(hidden_dim, num_atoms, members=num_members)
        self.head_bias = nn.Parameter(torch.zeros(num_members, num_atoms))
        self._init_support(v_min, v_max, num_atoms)

    def forward(self, obs_critic: torch.Tensor, action: torch.Tensor, training: bool) -> torch.Tensor:
        """Logits [members, B, num_atoms] (float32)."""
        x = torch.cat([obs_critic, action.to(obs_critic.dtype)], dim=-1)
        h = self.trunk(x.unsqueeze(0).expand(self.num_members, -1, -1), training)
        return self.head(h).float() + self.head_bias.unsqueeze(1)

    def project_(self, apply: torch.Tensor | None = None) -> None:
        project_unit_norm(self, apply)


def target_entropy_from_std(std: float, action_dim: int) -> float:
    """Entropy of an action_dim-dimensional Gaussian with std `std` per dim (FlashSAC's target)."""
    return 0.5 * action_dim * math.log(2.0 * math.pi * math.e * std * std)
