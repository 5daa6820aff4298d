"""Actor log-probabilities, sampling determinism and bounds; critic ensemble; obs normaliser."""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from duorl.algos.sac.networks import CategoricalCriticEnsemble, TanhGaussianActor
from duorl.algos.sac.normalizer import RunningObsNormalizer
from duorl.algos.tanh_gaussian import tanh_gaussian_log_prob


def _actor(normalize: bool = True, seed: int = 0) -> TanhGaussianActor:
    torch.manual_seed(seed)
    actor = TanhGaussianActor(6, 4, [16, 16], log_std_min=-5.0, log_std_max=0.5, obs_normalization=normalize)
    # random heads so mean and log_std vary with the observation (the real init zeroes them)
    for head in (actor.mean_head, actor.log_std_head):
        nn.init.normal_(head.weight, std=0.5)
        nn.init.normal_(head.bias, std=0.3)
    return actor


def test_log_prob_matches_torch_distributions() -> None:
    actor = _actor()
    obs = torch.randn(64, 6)
    gen = torch.Generator().manual_seed(3)
    state = gen.get_state()
    action, log_prob, mean_action = actor(obs, gen)

    mean, log_std = actor.distribution_params(obs)
    gen.set_state(state)
    pre_tanh = mean + log_std.exp() * torch.randn(mean.shape, generator=gen)
    base = torch.distributions.Normal(mean, log_std.exp())
    tanh = torch.distributions.transforms.TanhTransform()
    expect = base.log_prob(pre_tanh).sum(-1) - tanh.log_abs_det_jacobian(pre_tanh, torch.tanh(pre_tanh)).sum(-1)

    torch.testing.assert_close(action, torch.tanh(pre_tanh))
    torch.testing.assert_close(log_prob, expect, atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(mean_action, torch.tanh(mean))
    torch.testing.assert_close(mean_action, actor.act(obs))


def test_log_prob_is_a_density_over_actions() -> None:
    # numerical check in action space: p(a) integrates to 1 over (-1, 1), and the tanh Jacobian term
    # equals a finite-difference derivative of tanh
    mean = torch.tensor([[0.4]], dtype=torch.float64)
    log_std = torch.tensor([[math.log(0.7)]], dtype=torch.float64)
    a = torch.linspace(-1 + 1e-9, 1 - 1e-9, 200_001, dtype=torch.float64)
    u = torch.atanh(a).unsqueeze(-1)
    density = tanh_gaussian_log_prob(u, mean, log_std).exp()
    assert abs(torch.trapezoid(density, a).item() - 1.0) < 1e-4

    u = torch.linspace(-6, 6, 101, dtype=torch.float64).unsqueeze(-1)
    h = 1e-6
    fd = torch.log((torch.tanh(u + h) - torch.tanh(u - h)) / (2 * h)).squeeze(-1)
    gaussian = torch.distributions.Normal(mean, log_std.exp()).log_prob(u).squeeze(-1)
    torch.testing.assert_close(tanh_gaussian_log_prob(u, mean, log_std), gaussian - fd, atol=1e-6, rtol=1e-6)


def test_log_prob_finite_when_tanh_saturates() -> None:
    u = torch.tensor([[-40.0, 25.0, 12.0]])
    lp = tanh_gaussian_log_prob(u, torch.zeros(1, 3), torch.zeros(1, 3))
    assert torch.isfinite(lp).all()


def test_explore_is_deterministic_given_generator_and_bounded() -> None:
    actor = _actor()
    obs = torch.randn(128, 6) * 50  # large inputs push tanh into saturation
    a1 = actor.explore(obs, torch.Generator().manual_seed(11))
    a2 = actor.explore(obs, torch.Generator().manual_seed(11))
    a3 = actor.explore(obs, torch.Generator().manual_seed(12))
    assert torch.equal(a1, a2)
    assert not torch.equal(a1, a3)
    for a in (a1, a3, actor.act(obs), actor(obs, torch.Generator().manual_seed(1))[0]):
        assert a.shape == (128, 4)
        assert a.abs().max() <= 1.0
    assert not a1.requires_grad


def test_explore_with_mean_returns_the_explored_action_and_the_policy_output() -> None:
    actor = _actor()
    obs = torch.randn(64, 6)
    action, mean = actor.explore_with_mean(obs, torch.Generator().manual_seed(3))
    assert torch.equal(action, actor.explore(obs, torch.Generator().manual_seed(3)))
    assert torch.equal(mean, actor.act(obs))
    assert not torch.equal(action, mean)


def test_log_std_is_squashed_into_range() -> None:
    actor = _actor()
    nn.init.normal_(actor.log_std_head.weight, std=100.0)
    _, log_std = actor.distribution_params(torch.randn(256, 6))
    assert log_std.min() >= -5.0 and log_std.max() <= 0.5
    assert log_std.min() < -4.9 and log_std.max() > 0.4


def test_actor_state_dict_defines_the_policy() -> None:
    src, dst = _actor(seed=0), _actor(seed=1)
    src.obs_norm.update(torch.randn(100, 6) * 4 + 2)
    assert {"obs_norm.mean", "obs_norm.var", "obs_norm.count"} <= set(src.state_dict())
    dst.load_state_dict(src.state_dict())
    obs = torch.randn(8, 6)
    assert torch.equal(src.act(obs), dst.act(obs))
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    assert torch.equal(src.explore(obs, g1), dst.explore(obs, g2))
    assert not any(k.startswith("obs_norm") for k in _actor(normalize=False).state_dict())


def test_critic_members_are_independent_linear_layernorm_silu_stacks() -> None:
    torch.manual_seed(0)
    critic = CategoricalCriticEnsemble(5, 2, [16, 8], num_atoms=11, v_min=-1.0, v_max=1.0)
    obs, act = torch.randn(9, 5), torch.rand(9, 2) * 2 - 1
    logits = critic(obs, act)
    assert logits.shape == (2, 9, 11)
    assert not torch.allclose(logits[0], logits[1])
    torch.testing.assert_close(critic.support, torch.linspace(-1, 1, 11))

    for m in range(2):
        x = torch.cat([obs, act], -1)
        for layer in critic.net:
            if hasattr(layer, "weight") and layer.weight.dim() == 3:  # EnsembleLinear
                x = x @ layer.weight[m] + layer.bias[m]
            elif hasattr(layer, "weight"):  # EnsembleLayerNorm
                x = nn.functional.layer_norm(x, (x.shape[-1],), layer.weight[m], layer.bias[m])
            else:
                x = layer(x)
        torch.testing.assert_close(logits[m], x, atol=1e-5, rtol=1e-5)


def test_normalizer_matches_numpy_over_uneven_batches() -> None:
    norm = RunningObsNormalizer(3)
    g = torch.Generator().manual_seed(0)
    batches = [torch.randn(n, 3, generator=g) * torch.tensor([1.0, 5.0, 0.1]) + torch.tensor([3.0, -2.0, 0.0])
               for n in (1, 7, 100, 33, 512)]
    for b in batches:
        norm.update(b)
    all_x = torch.cat(batches).double().numpy()
    np.testing.assert_allclose(norm.mean.numpy(), all_x.mean(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(norm.var.numpy(), all_x.var(0), rtol=1e-4, atol=1e-6)
    assert norm.count.item() == len(all_x)
    x = torch.randn(4, 3)
    torch.testing.assert_close(norm(x), (x - norm.mean) / (norm.var.sqrt() + norm.eps))
