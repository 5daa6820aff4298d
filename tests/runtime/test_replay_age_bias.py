"""Age-biased replay sampling (WarpSAC): bucketed recency weights over the readable window."""

from __future__ import annotations

import pytest
import torch

from duorl.runtime.replay import AgeBias, ReplayLayout, ReplayRing, ReplaySampler


def _ring(n: int = 4, c: int = 64) -> ReplayRing:
    ring = ReplayRing.allocate(ReplayLayout(num_envs=n, capacity_ticks=c, actor_obs_dim=2, critic_obs_dim=2, action_dim=1),
                               torch.device("cpu"))
    for tick in range(c + 20):  # wrap around once: rows hold ticks 20..83
        v = torch.full((n,), float(tick))
        obs = {"actor": v[:, None].expand(n, 2).clone(), "critic": v[:, None].expand(n, 2).clone()}
        ring.write(tick, obs, torch.arange(n, dtype=torch.float32)[:, None], v, obs, torch.zeros(n),
                   (torch.arange(n) == tick % n).float())
    return ring


def _expected_tick_probs(lo: int, hi: int, bias: AgeBias, capacity: int) -> dict[int, float]:
    """Slow reference: bucket the window, weight each bucket at its mean age, spread within buckets."""
    w = hi - lo
    nb = min(bias.num_buckets, capacity)
    span = bias.decay_ticks if bias.decay_ticks > 0 else w
    probs: dict[int, float] = {}
    masses = []
    for j in range(nb):
        a, b = lo + (j * w) // nb, lo + ((j + 1) * w) // nb
        if b == a:
            continue
        mean_age = (hi - 1) - (a + b - 1) / 2
        weight = max(bias.min_weight, 1 - mean_age / span)
        masses.append((a, b, weight * (b - a)))
    total = sum(m for _, _, m in masses)
    for a, b, m in masses:
        for t in range(a, b):
            probs[t] = m / total / (b - a)
    return probs


@pytest.mark.parametrize("bias", [
    AgeBias(decay_ticks=20, min_weight=0.1, num_buckets=2000),  # per-tick weights, floor reached
    AgeBias(decay_ticks=0, min_weight=0.05, num_buckets=8),  # decay over the window, 8 buckets of 6 ticks
    AgeBias(decay_ticks=100, min_weight=0.5, num_buckets=5),  # uneven buckets (48 ticks / 5)
])
def test_age_biased_sampling_matches_the_bucketed_weights(bias: AgeBias) -> None:
    ring = _ring()
    sampler = ReplaySampler(ring, torch.Generator().manual_seed(0), check_window=True, age_bias=bias)
    lo, hi = 36, 84
    sampler.set_window(lo, hi)
    n = 120_000
    batch = sampler.sample(n)
    ticks = batch.reward.long()
    assert int(ticks.min()) >= lo and int(ticks.max()) < hi and sampler.violations == 0
    assert torch.equal(batch.obs_actor[:, 0], batch.reward)  # rows stay intact
    expect = _expected_tick_probs(lo, hi, bias, ring.capacity)
    counts = torch.bincount(ticks - lo, minlength=hi - lo).double()
    probs = torch.tensor([expect[t] for t in range(lo, hi)], dtype=torch.float64)
    chi2 = float(((counts - n * probs) ** 2 / (n * probs)).sum())
    assert chi2 < 100.0, chi2  # 47 dof: p ~ 1e-5 at 100
    # recent ticks are favoured (unless every weight hits the floor)
    assert counts[-6:].sum() > counts[:6].sum()
    # every env is drawn uniformly
    env_counts = torch.bincount(batch.action[:, 0].long(), minlength=4).double()
    assert float((env_counts / n - 0.25).abs().max()) < 0.01


def test_min_weight_one_is_uniform_and_windows_smaller_than_buckets_work() -> None:
    ring = _ring()
    uniform = ReplaySampler(ring, torch.Generator().manual_seed(0), age_bias=AgeBias(10, 1.0, 4))
    assert uniform.age_bias is None  # all weights 1: the plain uniform path
    biased = ReplaySampler(ring, torch.Generator().manual_seed(0), check_window=True, age_bias=AgeBias(10, 0.1, 2000))
    biased.set_window(80, 83)  # 3 ticks, 64 buckets: 61 empty buckets never drawn
    start, size, mass = biased.bucket_weights(biased.window[0], biased.window[1])
    assert start.shape == (64,) and int(size.sum()) == 3 and int((size > 0).sum()) == 3
    assert float(mass[size == 0].abs().sum()) == 0.0
    ticks = biased.sample(5000).reward.long()
    assert set(ticks.tolist()) == {80, 81, 82} and biased.violations == 0
    counts = torch.bincount(ticks - 80, minlength=3)
    assert counts[2] > counts[1] > counts[0]  # weights 1, 0.9, 0.8


def test_age_biased_sampling_is_deterministic_and_host_sync_free_shapes() -> None:
    ring = _ring()
    s1 = ReplaySampler(ring, torch.Generator().manual_seed(7), age_bias=AgeBias(16, 0.2, 10))
    s2 = ReplaySampler(ring, torch.Generator().manual_seed(7), age_bias=AgeBias(16, 0.2, 10))
    for s in (s1, s2):
        s.set_window(40, 80)
    assert torch.equal(s1.sample(300).reward, s2.sample(300).reward)
    with pytest.raises(ValueError):
        AgeBias(decay_ticks=-1)
    with pytest.raises(ValueError):
        AgeBias(min_weight=0.0)


def test_ring_keeps_truncation_and_reports_episode_ends() -> None:
    ring = _ring(n=4, c=64)
    reward, done = ring.ticks_rewards(80, 84)
    assert reward.shape == (4, 4) and torch.equal(reward[:, 0], torch.tensor([80.0, 81.0, 82.0, 83.0]))
    # the writer marked env (tick % 4) truncated at each tick
    assert torch.equal(done, torch.eye(4)[[0, 1, 2, 3]])
