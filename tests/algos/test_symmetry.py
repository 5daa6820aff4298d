"""algo.use_symmetry: each sampled batch is followed by its left-right mirror (EnvSpec.mirror)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from duorl.algos import registry
from duorl.config.errors import ConfigError
from duorl.config.schema import AlgoConfig
from duorl.envs.base import EnvSpec, Mirror

from .conftest import ToySampler

# actor obs 5: (a, b) swap, c flips, (d, e) swap with flips; critic 7: the same plus two kept
MIRROR = Mirror(
    actor_obs=((1, 0, 2, 4, 3), (1.0, 1.0, -1.0, -1.0, -1.0)),
    critic_obs=((1, 0, 2, 4, 3, 5, 6), (1.0, 1.0, -1.0, -1.0, -1.0, 1.0, 1.0)),
    action=((2, 1, 0), (1.0, -1.0, 1.0)),
)


def _spec(spec: EnvSpec) -> EnvSpec:
    return dataclasses.replace(spec, mirror=MIRROR)


def _apply(x: torch.Tensor, sp) -> torch.Tensor:
    return x[:, list(sp[0])] * torch.tensor(sp[1])


@pytest.mark.parametrize("algo", ["sac", "flashsac"])
def test_each_update_trains_on_the_batch_and_its_mirror(tiny_cfg: AlgoConfig, spec: EnvSpec, algo: str) -> None:
    cfg = dataclasses.replace(tiny_cfg, name=algo, use_symmetry=True)
    learner = registry.make_learner(cfg, _spec(spec), "cpu", seed=0)
    sampler = ToySampler(spec)
    seen = []
    plain = learner._augmented
    learner._augmented = lambda b: (seen.append((b, plain(b))), seen[-1][1])[1]
    metrics = learner.train_iteration(sampler, 2)
    assert all(torch.isfinite(v) for v in metrics.values())
    assert len(seen) == 2
    for sampled, used in seen:
        n = cfg.batch_size
        assert used.obs_actor.shape[0] == used.reward.shape[0] == 2 * n
        assert torch.equal(used.obs_actor[:n], sampled.obs_actor)
        assert torch.equal(used.obs_actor[n:], _apply(sampled.obs_actor, MIRROR.actor_obs))
        assert torch.equal(used.next_obs_critic[n:], _apply(sampled.next_obs_critic, MIRROR.critic_obs))
        assert torch.equal(used.action[n:], _apply(sampled.action, MIRROR.action))
        assert torch.equal(used.reward[n:], sampled.reward) and torch.equal(used.terminated[n:], sampled.terminated)


def test_off_by_default_and_then_the_batch_is_untouched(tiny_cfg: AlgoConfig, spec: EnvSpec) -> None:
    learner = registry.make_learner(tiny_cfg, _spec(spec), "cpu", seed=0)
    batch = ToySampler(spec)(8)
    assert learner._augmented(batch) is batch


def test_a_task_without_a_mirror_is_refused_naming_the_key(tiny_cfg: AlgoConfig, spec: EnvSpec) -> None:
    with pytest.raises(ConfigError, match="algo.use_symmetry") as e:
        registry.make_learner(dataclasses.replace(tiny_cfg, use_symmetry=True), spec, "cpu", seed=0)
    assert "set algo.use_symmetry=false" in str(e.value) and "toy" in str(e.value)


def test_g1_walk_turns_it_on_for_sac_only() -> None:
    from duorl.cli.configure import load_config

    assert load_config("sac", "g1_walk_flat", "mujoco", []).algo.use_symmetry is True
    assert load_config("flashsac", "g1_walk_flat", "mujoco", []).algo.use_symmetry is False
    assert load_config("sac", "pendulum_swingup", "mujoco", []).algo.use_symmetry is False
