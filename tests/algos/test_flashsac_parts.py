"""FlashSAC parts: unit-norm projection, the categorical TD target, reward scaling, held noise, lr schedule."""

from __future__ import annotations

import math

import pytest
import torch

from duorl.algos.flashsac.layers import (
    InvertedResidualBlock,
    Trunk,
    UnitBatchNorm,
    UnitLinear,
    UnitRMSNorm,
    project_unit_norm,
    projected_layers,
)
from duorl.algos.flashsac.learner import categorical_td_target
from duorl.algos.flashsac.noise import HeldNoise, sample_hold_lengths, truncated_zeta_pmf
from duorl.algos.flashsac.reward_scale import ReturnScale
from duorl.algos.flashsac.schedule import WarmupCosine, factor_reference
from duorl.algos.sac.categorical import categorical_projection_reference

# --- unit-norm projection ----------------------------------------------------------------------------


def _assert_on_sphere(module: torch.nn.Module) -> None:
    for m in projected_layers(module):
        if isinstance(m, UnitLinear):
            norms = m.weight.norm(dim=-1)
            assert torch.allclose(norms, torch.ones_like(norms), atol=1e-5), norms
        elif isinstance(m, UnitBatchNorm):
            joint = torch.sqrt(m.weight.square().sum(-1) + m.bias.square().sum(-1))
            assert torch.allclose(joint, torch.full_like(joint, math.sqrt(m.dim)), rtol=1e-5)
        elif isinstance(m, UnitRMSNorm):
            n = m.weight.norm(dim=-1)
            assert torch.allclose(n, torch.full_like(n, math.sqrt(m.dim)), rtol=1e-5)


@pytest.mark.parametrize("members", [None, 2])
def test_projection_puts_every_layer_back_on_its_sphere(members: int | None) -> None:
    torch.manual_seed(0)
    trunk = Trunk(7, 16, num_blocks=2, expansion=3, members=members)
    _assert_on_sphere(trunk)  # from construction (orthogonal rows, all-ones scales)
    opt = torch.optim.Adam(trunk.parameters(), lr=0.1)
    x = torch.randn(32, 7) if members is None else torch.randn(members, 32, 7)
    for _ in range(3):
        opt.zero_grad()
        trunk(x, training=True).square().sum().backward()
        opt.step()
        moved = [m for m in projected_layers(trunk) if isinstance(m, UnitLinear)]
        assert any(not torch.allclose(m.weight.norm(dim=-1), torch.ones(1), atol=1e-3) for m in moved)
        project_unit_norm(trunk)
        _assert_on_sphere(trunk)
    assert len(projected_layers(trunk)) == 2 + 2 * 4 + 1  # embed (BN, linear), 2 blocks, RMSNorm


def test_projection_of_a_linear_before_batchnorm_changes_no_output() -> None:
    # why the sphere costs nothing: BatchNorm after a linear map is invariant to each row's scale
    torch.manual_seed(1)
    block = InvertedResidualBlock(8, 2)
    x = torch.randn(64, 8)
    with torch.no_grad():
        block.expand.weight.mul_(torch.rand(16, 1) * 3 + 0.5)
        before = block(x, training=True)
        block.expand.project_()
        after = block(x, training=True)
    assert torch.allclose(before, after, atol=1e-4)


def test_batchnorm_running_statistics_and_eval_mode() -> None:
    bn = UnitBatchNorm(3, members=2, momentum=0.5)
    x = torch.randn(2, 100, 3) * 4 + 2
    y = bn(x, training=True)
    assert torch.allclose(y.mean(1), torch.zeros(2, 3), atol=1e-5)
    assert torch.allclose(bn.running_mean, 0.5 * x.mean(1), atol=1e-5)
    assert torch.allclose(bn.running_var, 0.5 + 0.5 * x.var(1, unbiased=True), atol=1e-4)
    # eval mode uses the running statistics and leaves them alone
    mean, var = bn.running_mean.clone(), bn.running_var.clone()
    z = bn(x, training=False)
    assert torch.equal(bn.running_mean, mean) and torch.equal(bn.running_var, var)
    assert torch.allclose(z, (x - mean.unsqueeze(1)) / torch.sqrt(var.unsqueeze(1) + bn.eps), atol=1e-5)
    assert all(t.is_floating_point() for t in bn.state_dict().values())  # weight-board safe


# --- categorical TD target -----------------------------------------------------------------------------


def _slow_td_target(probs, support, reward, discount, shift, v_min, v_max):
    """Loop reference: pick the member with the smaller mean per sample, shift, textbook projection."""
    rows = []
    for i in range(probs.shape[1]):
        means = [float((probs[m, i] * support).sum()) for m in range(probs.shape[0])]
        member = 0 if means[0] <= means[1] else 1
        atoms = reward[i] + discount[i] * (support - shift[i])
        rows.append(categorical_projection_reference(probs[member, i : i + 1], atoms.unsqueeze(0), v_min, v_max))
    return torch.cat(rows)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_td_target_conserves_mass_and_equals_slow_reference(seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    k, b, v_min, v_max = 101, 64, -5.0, 5.0
    support = torch.linspace(v_min, v_max, k)
    probs = torch.randn(2, b, k, generator=g).mul(3).softmax(-1)
    reward = torch.randn(b, generator=g) * 2  # some targets land beyond the support: clipped to its ends
    terminated = (torch.rand(b, generator=g) < 0.3).float()
    discount = 0.99 * (1.0 - terminated)
    shift = torch.randn(b, generator=g) * 0.5
    target = categorical_td_target(probs, support, reward, discount, shift, v_min, v_max)
    assert target.shape == (b, k)
    assert torch.allclose(target.sum(-1), torch.ones(b), atol=1e-5)  # mass conserved
    assert (target >= -1e-7).all()
    expect = _slow_td_target(probs.double(), support.double(), reward.double(), discount.double(), shift.double(), v_min, v_max)
    assert torch.allclose(target.double(), expect, atol=1e-5)
    # terminal samples put all their mass at the (clipped) reward
    for i in torch.nonzero(terminated).flatten().tolist():
        r = float(reward[i].clamp(v_min, v_max))
        mean = float((target[i] * support).sum())
        assert mean == pytest.approx(r, abs=1e-4)


# --- reward scaling -----------------------------------------------------------------------------------


def test_reward_scale_follows_discounted_returns_with_resets() -> None:
    gamma, g_max = 0.9, 5.0
    rs = ReturnScale(gamma, g_max)
    assert float(rs.scale()) == pytest.approx(1.0)  # nothing observed: rewards pass unchanged
    g = torch.Generator().manual_seed(0)
    t_steps, n = 40, 6
    reward = torch.rand(t_steps, n, generator=g) * 3
    done = (torch.rand(t_steps, n, generator=g) < 0.1).float()
    rs.observe(reward[:25], done[:25])
    rs.observe(reward[25:], done[25:])  # chunks merge exactly like one pass

    returns, history = torch.zeros(n, dtype=torch.float64), []
    for t in range(t_steps):
        returns = gamma * (1.0 - done[t].double()) * returns + reward[t].double()
        history.append(returns.clone())
    allg = torch.stack(history)
    assert torch.allclose(rs.returns.double(), returns, atol=1e-5)
    assert float(rs.count) == t_steps * n
    assert float(rs.mean) == pytest.approx(float(allg.mean()), rel=1e-4)
    assert float(rs.var) == pytest.approx(float(allg.var(unbiased=False)), rel=1e-4)
    assert float(rs.max_abs) == pytest.approx(float(allg.abs().max()), rel=1e-6)
    expect = max(math.sqrt(float(allg.var(unbiased=False)) + 1e-8), float(allg.abs().max()) / g_max)
    assert float(rs.scale()) == pytest.approx(expect, rel=1e-4)
    r = torch.tensor([1.0, -2.0])
    assert torch.allclose(rs(r), r / expect, rtol=1e-4)


def test_reward_scale_bounds_normalised_returns_by_g_max() -> None:
    # a constant reward has zero return variance: the |G|max term alone sets the scale
    rs = ReturnScale(0.99, 5.0)
    rs.observe(torch.ones(500, 2), torch.zeros(500, 2))
    g_inf = (1 - 0.99**500) / (1 - 0.99)
    assert float(rs.max_abs) == pytest.approx(g_inf, rel=1e-4)
    assert float(rs.max_abs / rs.scale()) <= 5.0 + 1e-4


# --- held exploration noise ----------------------------------------------------------------------------


def test_hold_lengths_follow_the_truncated_zeta_law() -> None:
    mu, n_max = 2.0, 16
    pmf = truncated_zeta_pmf(mu, n_max)
    assert float(pmf.sum()) == pytest.approx(1.0)
    assert float(pmf[0] / pmf[1]) == pytest.approx(2.0**mu)
    cdf = pmf.cumsum(0)
    cdf[-1] = 1.0
    n = 200_000
    u = torch.rand(n, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    holds = sample_hold_lengths(cdf, u)
    assert int(holds.min()) >= 1 and int(holds.max()) <= n_max
    counts = torch.bincount(holds, minlength=n_max + 1)[1:].double()
    expected = pmf * n
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 45.0, chi2  # 15 dof: p ~ 1e-4 at 45
    assert sample_hold_lengths(cdf, torch.tensor([0.0, cdf[0].item(), 1 - 1e-12], dtype=torch.float64)).tolist() == [1, 2, n_max]


def test_held_noise_keeps_each_draw_for_its_hold_then_redraws() -> None:
    noise = HeldNoise(2.0, 8)
    g = torch.Generator().manual_seed(3)
    steps, n, a = 400, 32, 2
    seq = torch.stack([noise(torch.Size([n, a]), torch.device("cpu"), torch.float32, g).clone() for _ in range(steps)])
    # run lengths of identical noise per env: all complete runs lie in [1, 8], and both short and long
    # holds occur
    runs: list[int] = []
    for e in range(n):
        length = 1
        for t in range(1, steps):
            if torch.equal(seq[t, e], seq[t - 1, e]):
                length += 1
            else:
                runs.append(length)
                length = 1
    assert min(runs) == 1 and max(runs) == 8
    mean = sum(runs) / len(runs)
    pmf = truncated_zeta_pmf(2.0, 8)
    assert mean == pytest.approx(float((pmf * torch.arange(1, 9)).sum()), rel=0.1)
    # deterministic from the generator
    other = HeldNoise(2.0, 8)
    g2 = torch.Generator().manual_seed(3)
    again = torch.stack([other(torch.Size([n, a]), torch.device("cpu"), torch.float32, g2).clone() for _ in range(steps)])
    assert torch.equal(seq, again)


def test_held_noise_state_round_trip() -> None:
    a, b = HeldNoise(2.0, 16), HeldNoise(2.0, 16)
    ga = torch.Generator().manual_seed(1)
    for _ in range(5):
        a(torch.Size([4, 3]), torch.device("cpu"), torch.float32, ga)
    b.load_state(a.state())
    gb = torch.Generator().manual_seed(0)
    gb.set_state(ga.get_state())
    for _ in range(10):
        assert torch.equal(
            a(torch.Size([4, 3]), torch.device("cpu"), torch.float32, ga),
            b(torch.Size([4, 3]), torch.device("cpu"), torch.float32, gb),
        )


# --- learning-rate schedule -----------------------------------------------------------------------------


@pytest.mark.parametrize(("warmup", "decay", "end"), [(0, 100, 0.5), (10, 50, 0.1), (3, 1, 0.0)])
def test_warmup_cosine_matches_reference(warmup: int, decay: int, end: float) -> None:
    sched = WarmupCosine(warmup, decay, end)
    lr = torch.tensor(0.0)
    for t in range(warmup + decay + 20):
        sched.apply_([(lr, 2e-3)])
        assert float(lr) == pytest.approx(2e-3 * factor_reference(t, warmup, decay, end), rel=1e-6, abs=1e-12)
        sched.advance_()
    assert float(lr) == pytest.approx(2e-3 * end, rel=1e-6, abs=1e-12)
    assert factor_reference(warmup, warmup, decay, end) == pytest.approx(1.0)  # the peak after warm-up
