"""FlashSACLearner on the CPU: it trains, it is deterministic, it continues bitwise from its state_dict,
and its actor fits the weight board and the collector."""

from __future__ import annotations

import io
from dataclasses import replace

import pytest
import torch

from duorl.algos import registry
from duorl.algos.flashsac.learner import METRIC_KEYS, FlashSACLearner
from duorl.algos.flashsac.networks import target_entropy_from_std
from duorl.config.schema import AlgoConfig
from duorl.envs.base import EnvSpec
from duorl.runtime.weights import WeightBoard, layout_of


@pytest.fixture
def flash_cfg() -> AlgoConfig:
    return AlgoConfig(
        name="flashsac", batch_size=32, num_atoms=21, v_min=-5.0, v_max=5.0, actor_lr=1e-3, critic_lr=1e-3,
        alpha_lr=1e-3, policy_frequency=2, actor_hidden_dim=16, actor_num_blocks=1, critic_hidden_dim=16,
        critic_num_blocks=1, block_expansion=2, weight_decay=0.0, alpha_init=0.01, obs_normalization=False,
        max_iterations=50, updates_per_step=2,
    )


def _tensors(learner: FlashSACLearner) -> list[torch.Tensor]:
    out = [
        t.detach().clone()
        for m in (learner.actor, learner.critic, learner.critic_target)
        for k, t in m.state_dict().items()
        if k != "support"  # the atoms' fixed values
    ]
    return out + [learner.log_alpha.detach().clone()]


def _observe(learner: FlashSACLearner, spec: EnvSpec) -> None:
    g = torch.Generator().manual_seed(9)
    learner.observe(torch.randn(64, spec.actor_obs_dim, generator=g), torch.randn(64, spec.critic_obs_dim, generator=g))
    learner.observe_rewards(torch.rand(10, 8, generator=g), (torch.rand(10, 8, generator=g) < 0.1).float())


def test_iteration_updates_everything_and_reports_metrics(flash_cfg, spec, make_sampler) -> None:
    learner = FlashSACLearner(flash_cfg, spec, "cpu", seed=0)
    _observe(learner, spec)
    before = _tensors(learner)
    metrics = learner.train_iteration(make_sampler(spec), 2)  # updates 0 (actor + critic) and 1 (critic)
    assert tuple(metrics) == METRIC_KEYS
    assert all(v.dim() == 0 and torch.isfinite(v) for v in metrics.values())
    after = _tensors(learner)
    assert all(not torch.equal(a, b) for a, b in zip(before, after)), "a parameter or statistic did not move"
    assert learner.num_updates == 2 and float(learner.lr_schedule.step) == 2
    assert float(metrics["Policy/reward_scale"]) == pytest.approx(float(learner.reward_scale.scale()))
    assert float(metrics["Policy/learning_rate"]) < flash_cfg.critic_lr  # cosine decay has begun
    # weights stay on the unit sphere after the steps
    for m in (learner.actor, learner.critic):
        lin = m.trunk.embed.linear.weight
        assert torch.allclose(lin.norm(dim=-1), torch.ones(1), atol=1e-5)


def test_target_entropy_is_that_of_a_gaussian_with_the_target_std(flash_cfg, spec) -> None:
    learner = FlashSACLearner(replace(flash_cfg, target_entropy_std=0.15), spec, "cpu", seed=0)
    per_dim = torch.distributions.Normal(0.0, 0.15).entropy().item()
    assert learner.target_entropy == pytest.approx(spec.action_dim * per_dim)
    assert target_entropy_from_std(1.0, 2) == pytest.approx(2 * 0.5 * torch.log(torch.tensor(2 * torch.pi * torch.e)).item())


def test_actor_schedule_follows_policy_frequency(flash_cfg, spec, make_sampler) -> None:
    learner = FlashSACLearner(replace(flash_cfg, policy_frequency=3), spec, "cpu", seed=0)
    sampler = make_sampler(spec)
    seen = []
    for _ in range(6):
        seen.append(learner._actor_due())
        learner.train_iteration(sampler, 1)
    assert seen == [True, False, False, True, False, False]  # FlashSAC: updates 0, f, 2f, ...
    assert learner.cycle_key(2) == (6 % 3, 2)


def test_same_seed_same_run_and_state_dict_continues_bitwise(flash_cfg, spec, make_sampler) -> None:
    a = FlashSACLearner(flash_cfg, spec, "cpu", seed=3)
    b = FlashSACLearner(flash_cfg, spec, "cpu", seed=3)
    assert all(torch.equal(x, y) for x, y in zip(_tensors(a), _tensors(b)))
    sa, sb = make_sampler(spec, seed=1), make_sampler(spec, seed=1)
    _observe(a, spec)
    _observe(b, spec)
    for _ in range(2):
        ma, mb = a.train_iteration(sa, 3), b.train_iteration(sb, 3)
        assert all(torch.equal(ma[k], mb[k]) for k in METRIC_KEYS)

    buf = io.BytesIO()
    torch.save(a.state_dict(), buf)
    sampler_state = sa.generator.get_state()
    expect = [a.train_iteration(sa, 3) for _ in range(2)]
    c = FlashSACLearner(flash_cfg, spec, "cpu", seed=99)
    buf.seek(0)
    generation = c.state_generation
    c.load_state_dict(torch.load(buf, weights_only=False))
    assert c.state_generation == generation + 1  # a load makes captured graphs stale
    sa.generator.set_state(sampler_state)
    got = [c.train_iteration(sa, 3) for _ in range(2)]
    for me, mg in zip(expect, got):
        assert all(torch.equal(me[k], mg[k]) for k in METRIC_KEYS)
    assert all(torch.equal(x, y) for x, y in zip(_tensors(a), _tensors(c)))
    assert torch.equal(a.reward_scale.returns, c.reward_scale.returns)
    # a checkpoint written while the per-env returns were a buffer (their own key) loads the same
    old = a.state_dict()
    old["reward_scale"] = dict(old["reward_scale"])
    old["reward_scale"]["returns"] = old["reward_scale"].pop("_extra_state")["returns"]
    d = FlashSACLearner(flash_cfg, spec, "cpu", seed=7)
    d.load_state_dict(old)
    assert torch.equal(a.reward_scale.returns, d.reward_scale.returns) and a.reward_scale.returns.numel() > 0


def test_actor_travels_on_the_weight_board_without_its_exploration_state(flash_cfg, spec) -> None:
    learner = registry.make_learner(flash_cfg, spec, "cpu", seed=0)
    actor = registry.make_actor(flash_cfg, spec, "cpu")
    board = WeightBoard.allocate(learner.actor, torch.device("cpu"))
    obs = torch.randn(8, spec.actor_obs_dim)
    g = torch.Generator().manual_seed(0)
    actor.explore(obs, g)  # creates the collector-side held noise
    keys = set(actor.state_dict())
    assert not any("noise" in k or "remaining" in k for k in keys)
    assert [e.name for e in layout_of(actor)] == [e.name for e in board.layout]
    board.publish(learner.actor, 1)
    board.load_into(actor, 1)
    assert torch.equal(actor.act(obs), learner.actor.act(obs))
    state = actor.exploration_state()
    assert set(state) == {"noise", "remaining"} and state["noise"].shape == (8, spec.action_dim)
    a1 = actor.explore(obs, g)
    assert a1.shape == (8, spec.action_dim) and bool((a1.abs() <= 1).all())


@pytest.mark.parametrize("name", ["flashsac", "warpsac"])
def test_registry_builds_flash_learners(flash_cfg, spec, name: str) -> None:
    learner = registry.make_learner(replace(flash_cfg, name=name), spec, "cpu", seed=0)
    assert isinstance(learner, FlashSACLearner)
    for method in ("graph_generators", "graph_optimizers", "graph_modules", "cycle_key", "host_state",
                   "load_host_state", "advance_host_state", "observe_rewards"):
        assert callable(getattr(learner, method))
