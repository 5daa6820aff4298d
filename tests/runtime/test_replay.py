import torch

from duorl.runtime.replay import ReplayLayout, ReplayRing, ReplaySampler, readable_window


def _ring(n=3, c=8):
    return ReplayRing.allocate(ReplayLayout(num_envs=n, capacity_ticks=c, actor_obs_dim=2, critic_obs_dim=3, action_dim=1), torch.device("cpu"))


def _write(ring, tick):
    n = ring.layout.num_envs
    v = torch.full((n,), float(tick))
    obs = {"actor": v[:, None].expand(n, 2).clone(), "critic": v[:, None].expand(n, 3).clone()}
    ring.write(tick, obs, v[:, None].clone(), v, obs, torch.zeros(n))


def test_window_excludes_rows_being_written():
    s, c = 2, 8
    for k in range(0, 20):
        lo, hi = readable_window(k, s, c)
        being_written = set(range(k * s, (k + 1) * s))
        overwritten_rows = {t % c for t in being_written}
        readable_rows = {t % c for t in range(lo, hi)}
        assert hi == k * s
        assert not (overwritten_rows & readable_rows), (k, lo, hi)
        assert hi - lo <= c - s


def test_sampler_reads_only_the_window_and_is_deterministic():
    ring = _ring()
    for t in range(12):
        _write(ring, t)
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    s1, s2 = ReplaySampler(ring, g1, check_window=True), ReplaySampler(ring, g2)
    s1.set_window(6, 12)
    s2.set_window(6, 12)
    b1, b2 = s1.sample(500), s2.sample(500)
    assert torch.equal(b1.reward, b2.reward)
    assert b1.reward.min() >= 6 and b1.reward.max() <= 11
    assert set(b1.reward.tolist()) == set(float(t) for t in range(6, 12))  # whole window reachable
    assert torch.equal(b1.obs_actor[:, 0], b1.reward)
    assert s1.violations == 0 and s1.samples_checked == 500


def test_window_check_flags_overwritten_rows():
    ring = _ring(c=8)
    for t in range(12):
        _write(ring, t)
    s = ReplaySampler(ring, torch.Generator().manual_seed(0), check_window=True)
    s.set_window(2, 6)  # rows of ticks 2..3 now hold ticks 10..11
    s.sample(200)
    assert s.violations > 0


def test_packed_ring_samples_what_the_separate_fields_sample() -> None:
    """algo.algo_params.packed_replay: the same writes, the same draws, the same batch (one gather)."""
    layout = ReplayLayout(num_envs=5, capacity_ticks=8, actor_obs_dim=4, critic_obs_dim=3, action_dim=2)
    rings = [ReplayRing.allocate(layout, torch.device("cpu"), packed=p) for p in (False, True)]
    assert rings[0].packed is None and rings[1].packed is not None
    assert rings[1].packed.shape == (8, 5, 2 * 4 + 2 * 3 + 2 + 2)
    g = torch.Generator().manual_seed(0)
    for t in range(11):
        obs = {"actor": torch.randn(5, 4, generator=g), "critic": torch.randn(5, 3, generator=g)}
        nxt = {"actor": torch.randn(5, 4, generator=g), "critic": torch.randn(5, 3, generator=g)}
        act, rew, term = torch.randn(5, 2, generator=g), torch.randn(5, generator=g), (torch.rand(5, generator=g) < 0.3).float()
        for ring in rings:
            ring.write(t, obs, act, rew, nxt, term)
    for key in rings[0].t:
        assert torch.equal(rings[0].t[key], rings[1].t[key]), key
    batches = []
    for ring in rings:
        sampler = ReplaySampler(ring, torch.Generator().manual_seed(3))
        sampler.set_window(3, 11)
        batches.append(sampler.sample(64))
    for field in ("obs_actor", "obs_critic", "action", "reward", "next_obs_actor", "next_obs_critic", "terminated"):
        a, b = getattr(batches[0], field), getattr(batches[1], field)
        assert a.shape == b.shape and torch.equal(a, b), field
