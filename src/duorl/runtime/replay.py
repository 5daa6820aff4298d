"""The shared replay ring and its sampler.

The ring holds `capacity_ticks` collector ticks of `num_envs` transitions each; tick t lives in row
t % capacity_ticks. The learner allocates it; the collector writes rows; the learner samples only from
a window of ticks that the collector cannot be writing (docs/design.md §3):

    learner iteration k reads ticks [max(0, k*s - (C - s)), k*s)

while collector iteration k writes ticks [k*s, (k+1)*s), which overwrite rows of ticks
[k*s - C, (k+1)*s - C): all below the window's lower edge. The collector cannot run further ahead,
because iteration k+1 needs weights that learner iteration k publishes only after it has sampled.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from duorl.algos.base import Batch


@dataclass(frozen=True)
class ReplayLayout:
    num_envs: int
    capacity_ticks: int
    actor_obs_dim: int
    critic_obs_dim: int
    action_dim: int

    @property
    def transitions(self) -> int:
        return self.num_envs * self.capacity_ticks

    def nbytes(self) -> int:
        per_row = 2 * (self.actor_obs_dim + self.critic_obs_dim) + self.action_dim + 3
        return 4 * per_row * self.transitions + 8 * self.capacity_ticks


FIELDS = ("obs_actor", "obs_critic", "action", "reward", "next_obs_actor", "next_obs_critic", "terminated")


@dataclass(frozen=True)
class AgeBias:
    """Age-biased sampling (WarpSAC): tick weight max(min_weight, 1 - age / decay_ticks), age 0 = newest.

    decay_ticks = 0 spans the decay over the current window (1 at the newest tick, falling linearly
    toward 0 at the oldest, floored at min_weight). Weights are evaluated per bucket: the window is cut into at most `num_buckets` runs of
    consecutive ticks (all of them when it has fewer ticks), each weighted at its mean age.
    """

    decay_ticks: int = 0
    min_weight: float = 0.1
    num_buckets: int = 2000

    @classmethod
    def of(cls, algo: Any) -> "AgeBias | None":
        """The bias an AlgoConfig asks for: algo.decay_step > 0 (WarpSAC), else None (uniform replay)."""
        if algo.decay_step <= 0:
            return None
        return cls(algo.decay_step, algo.replay_min_weight, algo.replay_num_buckets)

    def __post_init__(self) -> None:
        if self.decay_ticks < 0 or not 0.0 < self.min_weight <= 1.0 or self.num_buckets < 1:
            raise ValueError(f"invalid AgeBias {self}: decay_ticks >= 0, 0 < min_weight <= 1, num_buckets >= 1")


def readable_window(iteration: int, env_steps_per_sync: int, capacity_ticks: int) -> tuple[int, int]:
    """Ticks [lo, hi) that learner iteration `iteration` may sample."""
    hi = iteration * env_steps_per_sync
    lo = max(0, hi - (capacity_ticks - env_steps_per_sync))
    return lo, hi


def _field_widths(layout: ReplayLayout) -> dict[str, int]:
    """Floats per transition of each sampled field (0: a scalar per transition)."""
    return {"obs_actor": layout.actor_obs_dim, "obs_critic": layout.critic_obs_dim, "action": layout.action_dim,
            "reward": 0, "next_obs_actor": layout.actor_obs_dim, "next_obs_critic": layout.critic_obs_dim,
            "terminated": 0}


class ReplayRing:
    """Fixed-size transition storage shared between the learner (reads) and the collector (writes).

    `t` maps each field to a [capacity_ticks, num_envs, ...] tensor. Packed (algo.algo_params.packed_replay),
    the seven sampled fields are views side by side in one [capacity_ticks, num_envs, F] tensor, `packed`,
    so that a minibatch is one gather of whole rows instead of one per field; `columns` says where each
    field sits in such a row. The collector writes through the views either way.
    """

    def __init__(self, tensors: dict[str, torch.Tensor], layout: ReplayLayout, packed: torch.Tensor | None = None) -> None:
        self.layout = layout
        self.t = tensors
        self.capacity = layout.capacity_ticks
        self.packed = packed
        self.columns: dict[str, slice | int] = {}
        offset = 0
        for key, width in _field_widths(layout).items():
            self.columns[key] = slice(offset, offset + width) if width else offset
            offset += max(width, 1)
        self.row_width = offset

    @classmethod
    def allocate(cls, layout: ReplayLayout, device: torch.device, packed: bool = False) -> "ReplayRing":
        c, n = layout.capacity_ticks, layout.num_envs
        widths = _field_widths(layout)
        store = None
        if packed:
            store = torch.zeros((c, n, sum(max(w, 1) for w in widths.values())), dtype=torch.float32, device=device)
        tensors: dict[str, torch.Tensor] = {}
        offset = 0
        for key, width in widths.items():
            if store is None:
                tensors[key] = torch.zeros((c, n, width) if width else (c, n), dtype=torch.float32, device=device)
            else:
                tensors[key] = store[:, :, offset:offset + width] if width else store[:, :, offset]
            offset += max(width, 1)
        # truncated: time-limit ends, which the learner needs only to follow returns per env (rewards
        # scaled by the discounted return); the critic target uses `terminated` alone
        tensors["truncated"] = torch.zeros((c, n), dtype=torch.float32, device=device)
        # the tick each row holds (-1 = never written): lets tests prove which ticks were sampled
        tensors["tick"] = torch.full((c,), -1, dtype=torch.int64, device=device)
        if device.type == "cpu":
            for v in tensors.values():
                v.share_memory_()  # a packed field's view shares the whole store (once)
        return cls(tensors, layout, store)

    def write(
        self,
        tick: int | torch.Tensor,
        obs: dict[str, torch.Tensor],
        action: torch.Tensor,
        reward: torch.Tensor,
        next_obs: dict[str, torch.Tensor],
        terminated: torch.Tensor,
        truncated: torch.Tensor | None = None,
    ) -> None:
        """Store one tick of transitions. The collector passes `tick` as a 0-d int64 device tensor: the
        row is chosen on the device (no host sync), so the write can sit inside a captured tick. An int
        is accepted too (tests; on CUDA it costs a host-to-device copy)."""
        t = self.t
        if truncated is None:
            truncated = torch.zeros_like(reward)
        if not isinstance(tick, torch.Tensor):
            tick = torch.tensor(tick, dtype=torch.int64, device=t["tick"].device)
        values = {
            "obs_actor": obs["actor"], "obs_critic": obs["critic"], "action": action, "reward": reward,
            "next_obs_actor": next_obs["actor"], "next_obs_critic": next_obs["critic"],
            "terminated": terminated, "truncated": truncated,
        }
        row = (tick % self.capacity).view(1)
        for key, v in values.items():
            t[key].index_copy_(0, row, v.to(t[key].dtype).unsqueeze(0))
        t["tick"].index_copy_(0, row, tick.view(1))

    def ticks_obs(self, lo: int, hi: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Observations of ticks [lo, hi) flattened to [(hi-lo)*N, dim] (for normaliser updates)."""
        rows = torch.arange(lo, hi, device=self.t["tick"].device) % self.capacity
        a = self.t["obs_actor"][rows].reshape(-1, self.layout.actor_obs_dim)
        c = self.t["obs_critic"][rows].reshape(-1, self.layout.critic_obs_dim)
        return a, c

    def ticks_rewards(self, lo: int, hi: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Rewards and episode ends (terminated or truncated) of ticks [lo, hi), [hi-lo, N] each, in tick order."""
        rows = torch.arange(lo, hi, device=self.t["tick"].device) % self.capacity
        done = torch.maximum(self.t["terminated"][rows], self.t["truncated"][rows])
        return self.t["reward"][rows], done


class ReplaySampler:
    """Sampling over the readable window, uniform or age-biased, driven by device tensors so that it
    needs no host sync (and is captured inside the learner's CUDA graph: register `generator`)."""

    def __init__(
        self, ring: ReplayRing, generator: torch.Generator, check_window: bool = False, age_bias: AgeBias | None = None
    ) -> None:
        self.ring = ring
        self.age_bias = age_bias if age_bias is not None and age_bias.min_weight < 1.0 else None
        device = ring.t["tick"].device
        self.device = device
        self.generator = generator
        # [lo_tick, hi_tick) as a device tensor (a captured update reads it), refilled each iteration by two
        # fills: a fill takes its value as a kernel argument, where a copy from a host tensor would wait for
        # the stream (a blocking copy), i.e. for the update still queued before it
        self.window = torch.zeros(2, dtype=torch.int64, device=device)
        self.check_window = check_window
        self.violations = 0
        self.samples_checked = 0

    def set_window(self, lo: int, hi: int) -> None:
        if hi <= lo:
            raise ValueError(f"empty replay window [{lo}, {hi})")
        self.window[0].fill_(lo)
        self.window[1].fill_(hi)

    def sample(self, batch_size: int) -> Batch:
        n = self.ring.layout.num_envs
        lo, hi = self.window[0], self.window[1]
        if self.age_bias is None:
            count = (hi - lo) * n
            u = torch.rand(batch_size, generator=self.generator, device=self.device, dtype=torch.float64)
            flat = torch.minimum((u * count).long(), count - 1)
            tick = lo + torch.div(flat, n, rounding_mode="floor")
            env = flat % n
        else:
            tick, env = self._sample_age_biased(batch_size, lo, hi)
        row = tick % self.ring.capacity
        t = self.ring.t
        if self.check_window:
            self._check(row, lo, hi)
        if self.ring.packed is not None:
            rows = self.ring.packed[row, env]  # [B, F]: one gather, the fields are views of it
            return Batch(**{key: rows[:, col] for key, col in self.ring.columns.items()})
        return Batch(**{key: t[key][row, env] for key in FIELDS})

    def bucket_weights(self, lo: torch.Tensor, hi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(first tick, tick count, sampling mass) per bucket of the window [lo, hi), float64 mass.

        Fixed shapes whatever the window: buckets = min(num_buckets, capacity); bucket j covers ticks
        [lo + floor(j*W/B), lo + floor((j+1)*W/B)), W = hi - lo, so empty buckets (W < B) get no mass
        and the last bucket is never empty.
        """
        bias = self.age_bias
        assert bias is not None
        nb = min(bias.num_buckets, self.ring.capacity)
        j = torch.arange(nb + 1, device=self.device, dtype=torch.int64)
        w = hi - lo
        edges = lo + torch.div(j * w, nb, rounding_mode="floor")
        start, size = edges[:-1], edges[1:] - edges[:-1]
        # mean age of a bucket's ticks: newest tick hi-1 has age 0
        mean_age = (hi - 1).double() - (start.double() + (size.double() - 1.0) * 0.5)
        span = float(bias.decay_ticks) if bias.decay_ticks > 0 else w.double().clamp(min=1.0)
        weight = (1.0 - mean_age / span).clamp(min=bias.min_weight)
        return start, size, weight * size.double()

    def _sample_age_biased(self, batch_size: int, lo: torch.Tensor, hi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        start, size, mass = self.bucket_weights(lo, hi)
        cdf = torch.cumsum(mass, 0)
        u = torch.rand(3, batch_size, generator=self.generator, device=self.device, dtype=torch.float64)
        # inverse CDF over buckets (an empty bucket adds no step to the CDF, so it is never picked)
        bucket = torch.searchsorted(cdf, u[0] * cdf[-1], right=True).clamp_(max=cdf.numel() - 1)
        count = size[bucket]
        tick = start[bucket] + torch.minimum((u[1] * count).long(), count - 1)
        n = self.ring.layout.num_envs
        env = (u[2] * n).long().clamp_(max=n - 1)
        return tick, env

    def _check(self, row: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> None:
        # debug only: a row whose stamp is outside [lo, hi) was either overwritten for a newer tick
        # (being written now) or is stale; both mean the protocol broke
        stamps = self.ring.t["tick"][row]
        bad = ((stamps < lo) | (stamps >= hi)).sum()
        self.violations += int(bad)
        self.samples_checked += int(row.numel())
