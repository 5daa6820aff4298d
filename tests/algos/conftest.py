"""Shared fixtures for the algorithm tests: tiny configs and deterministic replay samplers."""

from __future__ import annotations

import pytest
import torch

from duorl.algos.base import Batch
from duorl.config.schema import AlgoConfig
from duorl.envs.base import EnvSpec


@pytest.fixture
def spec() -> EnvSpec:
    return EnvSpec(task="toy", actor_obs_dim=5, critic_obs_dim=7, action_dim=3, max_episode_steps=10, control_dt=0.02)


@pytest.fixture
def tiny_cfg() -> AlgoConfig:
    return AlgoConfig(
        batch_size=32,
        actor_hidden_dims=[32, 32],
        critic_hidden_dims=[32, 32],
        num_atoms=21,
        v_min=-10.0,
        v_max=10.0,
        actor_lr=1e-3,
        critic_lr=1e-3,
    )


class ToySampler:
    """A fixed random replay of `size` transitions; draws rows with its own generator."""

    def __init__(self, spec: EnvSpec, size: int = 256, seed: int = 0, fixed: bool = False) -> None:
        g = torch.Generator().manual_seed(seed)
        self.data = Batch(
            obs_actor=torch.randn(size, spec.actor_obs_dim, generator=g) * 2 + 1,
            obs_critic=torch.randn(size, spec.critic_obs_dim, generator=g) * 3 - 1,
            action=torch.rand(size, spec.action_dim, generator=g) * 2 - 1,
            reward=torch.randn(size, generator=g),
            next_obs_actor=torch.randn(size, spec.actor_obs_dim, generator=g) * 2 + 1,
            next_obs_critic=torch.randn(size, spec.critic_obs_dim, generator=g) * 3 - 1,
            terminated=(torch.rand(size, generator=g) < 0.2).float(),
        )
        self.size = size
        self.fixed = fixed  # always return the same first rows (a fixed toy batch)
        self.generator = torch.Generator().manual_seed(seed + 1)

    def __call__(self, batch_size: int) -> Batch:
        if self.fixed:
            idx = torch.arange(batch_size) % self.size
        else:
            idx = torch.randint(0, self.size, (batch_size,), generator=self.generator)
        d = self.data
        return Batch(*(getattr(d, f)[idx] for f in Batch.__dataclass_fields__))


@pytest.fixture
def make_sampler():
    return ToySampler


@pytest.fixture(autouse=True)
def _one_torch_thread():
    # these nets are tiny: intra-op threading only adds synchronisation cost (several x on 2 vCPUs)
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
