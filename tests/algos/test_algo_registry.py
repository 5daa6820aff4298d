"""Factories: every algorithm the schema names is built, and the collector's actor."""

from __future__ import annotations

import copy
import functools
import pickle
from dataclasses import replace

import pytest
import torch

from duorl.algos import registry
from duorl.algos.base import Learner
from duorl.config.schema import AlgoConfig
from duorl.envs.base import EnvSpec


def test_make_learner_builds_sac(tiny_cfg: AlgoConfig, spec: EnvSpec) -> None:
    learner = registry.make_learner(tiny_cfg, spec, "cpu", seed=0)
    assert registry.ALGOS == ("sac", "flashsac", "warpsac")  # the schema's one list, every name built
    for name in ("observe", "train_iteration", "state_dict", "load_state_dict"):
        assert callable(getattr(learner, name))
    assert isinstance(learner.actor, torch.nn.Module)
    _: Learner = learner  # structural conformance, for type checkers


@pytest.mark.parametrize("name", ["flashsac", "warpsac"])
def test_flash_algos_build_the_flashsac_learner(tiny_cfg: AlgoConfig, spec: EnvSpec, name: str) -> None:
    from duorl.algos.flashsac.learner import FlashSACLearner
    from duorl.algos.flashsac.networks import FlashSACActor

    cfg = replace(tiny_cfg, name=name, actor_hidden_dim=16, critic_hidden_dim=16)
    assert isinstance(registry.make_learner(cfg, spec, "cpu", seed=0), FlashSACLearner)
    assert isinstance(registry.make_actor(cfg, spec, "cpu"), FlashSACActor)


@pytest.mark.parametrize("name", ["sac", "flashsac"])
def test_every_collector_actor_explores_with_its_mean(tiny_cfg: AlgoConfig, spec: EnvSpec, name: str) -> None:
    """The collector's tick hands the env each explored action and the policy output behind it."""
    actor = registry.make_actor(replace(tiny_cfg, name=name), spec, "cpu")
    twin = copy.deepcopy(actor)  # flashsac's held noise is state: compare first calls of equal actors
    obs = torch.randn(16, spec.actor_obs_dim)
    action, mean = actor.explore_with_mean(obs, torch.Generator().manual_seed(2))
    assert torch.equal(action, twin.explore(obs, torch.Generator().manual_seed(2)))
    assert torch.equal(mean, actor.act(obs))
    assert action.shape == mean.shape == (16, spec.action_dim) and not torch.equal(action, mean)


def test_unknown_algo_is_an_error(tiny_cfg: AlgoConfig, spec: EnvSpec) -> None:
    with pytest.raises(ValueError, match="nope"):
        registry.make_learner(replace(tiny_cfg, name="nope"), spec, "cpu", seed=0)


def test_collector_actor_pickles_and_loads_the_learners_weights(tiny_cfg: AlgoConfig, spec: EnvSpec) -> None:
    learner = registry.make_learner(tiny_cfg, spec, "cpu", seed=0)
    learner.observe(torch.randn(64, spec.actor_obs_dim) * 2, torch.randn(64, spec.critic_obs_dim))
    factory = pickle.loads(pickle.dumps(functools.partial(registry.make_actor, tiny_cfg, spec, torch.device("cpu"))))
    torch.manual_seed(0)
    before = torch.rand(2)
    torch.manual_seed(0)
    actor = factory()
    assert torch.equal(torch.rand(2), before)  # building the actor leaves the global RNG alone
    assert actor.state_dict().keys() == learner.actor.state_dict().keys()
    actor.load_state_dict(learner.actor.state_dict())
    obs = torch.randn(16, spec.actor_obs_dim)
    assert torch.equal(actor.act(obs), learner.actor.act(obs))
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    assert torch.equal(actor.explore(obs, g1), learner.actor.explore(obs, g2))
