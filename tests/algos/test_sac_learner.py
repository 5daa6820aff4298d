"""SACLearner: metrics, parameter updates, actor schedule, checkpoint continuity, RNG isolation,
normalisers, and a one-step bandit it must solve."""

from __future__ import annotations

import io
from dataclasses import replace

import pytest
import torch

from duorl.algos.base import Batch
from duorl.algos.sac.learner import METRIC_KEYS, SACLearner
from duorl.config.schema import AlgoConfig
from duorl.envs.base import EnvSpec


def _params(learner: SACLearner) -> dict[str, torch.Tensor]:
    """Every trainable tensor (and the targets) by name, cloned."""
    out = {f"actor.{k}": v.detach().clone() for k, v in learner.actor.named_parameters()}
    out.update({f"critic.{k}": v.detach().clone() for k, v in learner.critic.named_parameters()})
    out.update({f"target.{k}": v.detach().clone() for k, v in learner.critic_target.named_parameters()})
    out["log_alpha"] = learner.log_alpha.detach().clone()
    return out


def _changed(before: dict[str, torch.Tensor], after: dict[str, torch.Tensor], prefix: str) -> dict[str, bool]:
    return {k: not torch.equal(v, after[k]) for k, v in before.items() if k.startswith(prefix)}


def test_metrics_are_finite_scalar_tensors(tiny_cfg: AlgoConfig, spec: EnvSpec, make_sampler) -> None:
    learner = SACLearner(tiny_cfg, spec, torch.device("cpu"), seed=0)
    metrics = learner.train_iteration(make_sampler(spec), 4)
    assert tuple(metrics) == METRIC_KEYS
    for name, value in metrics.items():
        assert isinstance(value, torch.Tensor) and value.dim() == 0, name
        assert torch.isfinite(value), name
        assert not value.requires_grad, name
    torch.testing.assert_close(metrics["Policy/alpha"], torch.tensor(tiny_cfg.alpha_init), rtol=0.01, atol=0)


def test_one_iteration_changes_every_parameter(tiny_cfg: AlgoConfig, spec: EnvSpec, make_sampler) -> None:
    # defaults: 8 updates, actor every 4th -> two actor steps; the zero-initialised heads make the
    # first actor step reach only the heads, the second reaches the whole trunk
    cfg = replace(tiny_cfg, updates_per_step=8, policy_frequency=4)
    learner = SACLearner(cfg, spec, torch.device("cpu"), seed=0)
    before = _params(learner)
    learner.train_iteration(make_sampler(spec), cfg.updates_per_step)
    after = _params(learner)
    unchanged = [k for k, v in _changed(before, after, "").items() if not v]
    assert unchanged == []


def test_max_grad_norm_path_trains(tiny_cfg: AlgoConfig, spec: EnvSpec, make_sampler) -> None:
    learner = SACLearner(replace(tiny_cfg, max_grad_norm=0.5), spec, torch.device("cpu"), seed=0)
    before = _params(learner)
    metrics = learner.train_iteration(make_sampler(spec), 4)
    assert all(torch.isfinite(v) for v in metrics.values())
    assert all(_changed(before, _params(learner), "critic.").values())


def test_critic_loss_decreases_on_a_fixed_batch(tiny_cfg: AlgoConfig, spec: EnvSpec, make_sampler) -> None:
    learner = SACLearner(tiny_cfg, spec, torch.device("cpu"), seed=0)
    sampler = make_sampler(spec, size=tiny_cfg.batch_size, fixed=True)
    losses = [learner.train_iteration(sampler, 8)["Loss/critic"].item() for _ in range(25)]
    # the target moves with the target critic and the cross-entropy has a floor (the target's own
    # entropy), so ask for a clear, mostly steady decrease rather than a fixed rate
    assert losses[-1] < 0.75 * losses[0], losses
    assert sum(b < a for a, b in zip(losses, losses[1:])) >= 0.8 * (len(losses) - 1), losses


def test_policy_frequency_is_counted_across_calls(tiny_cfg: AlgoConfig, spec: EnvSpec, make_sampler) -> None:
    learner = SACLearner(replace(tiny_cfg, policy_frequency=3), spec, torch.device("cpu"), seed=0)
    sampler = make_sampler(spec)
    # (updates this call, does it contain update number 3k?) -> updates 1-2 | 3-4 | 5-6 | 7 | 8-9
    plan = [(2, False), (2, True), (2, True), (1, False), (2, True)]
    last_actor_loss = None
    for num_updates, expect_actor in plan:
        before = _params(learner)
        metrics = learner.train_iteration(sampler, num_updates)
        changed = _changed(before, _params(learner), "actor.")
        changed_alpha = not torch.equal(before["log_alpha"], learner.log_alpha.detach())
        assert any(changed.values()) == expect_actor
        assert changed_alpha == expect_actor
        assert all(_changed(before, _params(learner), "critic.").values())  # the critic always trains
        if not expect_actor and last_actor_loss is not None:
            assert torch.equal(metrics["Loss/actor"], last_actor_loss)  # the latest actor update's value
        last_actor_loss = metrics["Loss/actor"]
    assert learner.num_updates == 9


def test_state_dict_round_trip_continues_bitwise(tiny_cfg: AlgoConfig, spec: EnvSpec, make_sampler) -> None:
    cfg = replace(tiny_cfg, policy_frequency=2)
    a = SACLearner(cfg, spec, torch.device("cpu"), seed=0)
    sampler = make_sampler(spec)
    obs = make_sampler(spec, seed=9).data
    for _ in range(3):
        a.observe(obs.obs_actor[:50], obs.obs_critic[:50])
        a.train_iteration(sampler, 3)  # 9 updates: the actor schedule is mid-phase at the snapshot

    a.critic_optimizer.param_groups[0]["lr"].fill_(5e-4)  # as a schedule would
    buf = io.BytesIO()
    torch.save({"learner": a.state_dict(), "sampler": sampler.generator.get_state()}, buf)
    sampler_state = sampler.generator.get_state()

    def continue_run(learner: SACLearner) -> list[dict[str, torch.Tensor]]:
        sampler.generator.set_state(sampler_state)
        out = []
        for i in range(3):
            learner.observe(obs.obs_actor[i:i + 20], obs.obs_critic[i:i + 20])
            out.append(learner.train_iteration(sampler, 3))
        return out

    metrics_a = continue_run(a)
    b = SACLearner(cfg, spec, torch.device("cpu"), seed=123)  # different init and sampling stream
    lr_before = b.critic_optimizer.param_groups[0]["lr"]
    buf.seek(0)
    b.load_state_dict(torch.load(buf, weights_only=False, map_location="cpu")["learner"])
    # the learning rate stays the learner's own tensor (graphs and schedules hold it) with the saved value
    assert b.critic_optimizer.param_groups[0]["lr"] is lr_before
    assert lr_before.item() == pytest.approx(5e-4)
    metrics_b = continue_run(b)

    for ma, mb in zip(metrics_a, metrics_b):
        for k in METRIC_KEYS:
            assert torch.equal(ma[k], mb[k]), k
    pa, pb = _params(a), _params(b)
    assert all(torch.equal(pa[k], pb[k]) for k in pa)
    for k, v in a.actor.state_dict().items():
        assert torch.equal(v, b.actor.state_dict()[k]), k
    assert torch.equal(a.critic_obs_norm.mean, b.critic_obs_norm.mean)
    assert a.num_updates == b.num_updates == 18


def test_global_rng_is_neither_used_nor_consumed(tiny_cfg: AlgoConfig, spec: EnvSpec, make_sampler) -> None:
    torch.manual_seed(0)
    expect = torch.rand(3)
    torch.manual_seed(0)
    a = SACLearner(tiny_cfg, spec, torch.device("cpu"), seed=5)
    a.train_iteration(make_sampler(spec), 4)
    assert torch.equal(torch.rand(3), expect)

    torch.manual_seed(999)
    b = SACLearner(tiny_cfg, spec, torch.device("cpu"), seed=5)
    b.train_iteration(make_sampler(spec), 4)
    pa, pb = _params(a), _params(b)
    assert all(torch.equal(pa[k], pb[k]) for k in pa)

    c = SACLearner(tiny_cfg, spec, torch.device("cpu"), seed=6)
    assert not torch.equal(_params(c)["critic.net.0.weight"], pa["critic.net.0.weight"])


def test_observe_updates_both_normalisers(tiny_cfg: AlgoConfig, spec: EnvSpec) -> None:
    learner = SACLearner(tiny_cfg, spec, torch.device("cpu"), seed=0)
    oa, oc = torch.randn(200, 5) * 3 + 1, torch.randn(200, 7) * 0.5 - 2
    learner.observe(oa[:120], oc[:120])
    learner.observe(oa[120:], oc[120:])
    torch.testing.assert_close(learner.actor.obs_norm.mean, oa.mean(0), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(learner.actor.obs_norm.var, oa.var(0, unbiased=False), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(learner.critic_obs_norm.mean, oc.mean(0), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(learner.critic_obs_norm.var, oc.var(0, unbiased=False), atol=1e-5, rtol=1e-4)
    assert learner.actor.obs_norm.count.item() == 200

    plain = SACLearner(replace(tiny_cfg, obs_normalization=False), spec, torch.device("cpu"), seed=0)
    plain.observe(oa, oc)  # a no-op
    assert plain.actor.obs_norm is None and plain.critic_obs_norm is None


def test_learns_a_one_step_contextual_bandit() -> None:
    # reward = -||a - target(s)||^2, every step terminal; uniform random actions in replay. The critic
    # must learn r(s, a) and the actor its argmax: a rotation of the observation.
    spec = EnvSpec(task="bandit", actor_obs_dim=2, critic_obs_dim=2, action_dim=2, max_episode_steps=1, control_dt=0.02)
    cfg = AlgoConfig(
        batch_size=128, actor_hidden_dims=[64, 64], critic_hidden_dims=[64, 64], num_atoms=51,
        v_min=-5.0, v_max=1.0, actor_lr=1e-3, critic_lr=1e-3, policy_frequency=2,
    )
    learner = SACLearner(cfg, spec, torch.device("cpu"), seed=0)
    g = torch.Generator().manual_seed(0)
    n = 4096
    obs = torch.rand(n, 2, generator=g) * 2 - 1
    act = torch.rand(n, 2, generator=g) * 2 - 1

    def target(o: torch.Tensor) -> torch.Tensor:
        return 0.6 * torch.stack([o[:, 1], -o[:, 0]], -1)

    reward = -(act - target(obs)).square().sum(-1)

    def sample(b: int) -> Batch:
        i = torch.randint(0, n, (b,), generator=g)
        return Batch(obs[i], obs[i], act[i], reward[i], obs[i], obs[i], torch.ones(b))

    learner.observe(obs, obs)
    test_obs = torch.rand(512, 2, generator=g) * 2 - 1
    err0 = (learner.actor.act(test_obs) - target(test_obs)).square().sum(-1).mean().item()
    for _ in range(40):
        learner.train_iteration(sample, 8)
    err = (learner.actor.act(test_obs) - target(test_obs)).square().sum(-1).mean().item()
    assert err0 > 0.2
    assert err < 0.02, err


@pytest.mark.parametrize("bad", [0, -1])
def test_rejects_bad_policy_frequency(tiny_cfg: AlgoConfig, spec: EnvSpec, bad: int) -> None:
    with pytest.raises(ValueError, match="policy_frequency"):
        SACLearner(replace(tiny_cfg, policy_frequency=bad), spec, torch.device("cpu"), seed=0)
