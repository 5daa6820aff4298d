"""The shared replay ring and its sampler.

The ring holds `capacity_ticks` collector ticks of `num_envs` transitions each; tick t lives in row
t % capacity_ticks. The learner allocates it; the collector writes rows; the learner samples only from
a window of ticks that the collector cannot be writing (DESIGN.md §3):

    learner iteration k reads ticks [max(0, k*s - (C - s)), k*s)

while collector iteration k writes ticks [k*s, (k+1)*s), which overwrite rows of ticks
[k*s - C, (k+1)*s - C): all below the window's lower edge. The collector cannot run further ahead,
because iteration k+1 needs weights that learner iteration k publishes only after it has sampled.
"""

from __future__ import annotations

from dataclasses import dataclass

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
        per_row = 2 * (self.actor_obs_dim + self.critic_obs_dim) + self.action_dim + 2
        return 4 * per_row * self.transitions + 8 * self.capacity_ticks


FIELDS = ("obs_actor", "obs_critic", "action", "reward", "next_obs_actor", "next_obs_critic", "terminated")


def readable_window(iteration: int, env_steps_per_sync: int, capacity_ticks: int) -> tuple[int, int]:
    """Ticks [lo, hi) that learner iteration `iteration` may sample."""
    hi = iteration * env_steps_per_sync
    lo = max(0, hi - (capacity_ticks - env_steps_per_sync))
    return lo, hi


class ReplayRing:
    """Fixed-size transition storage shared between the learner (reads) and the collector (writes)."""

    def __init__(self, tensors: dict[str, torch.Tensor], layout: ReplayLayout) -> None:
        self.layout = layout
        self.t = tensors
        self.capacity = layout.capacity_ticks

    @classmethod
    def allocate(cls, layout: ReplayLayout, device: torch.device) -> "ReplayRing":
        c, n = layout.capacity_ticks, layout.num_envs
        dims = {
            "obs_actor": (layout.actor_obs_dim,),
            "obs_critic": (layout.critic_obs_dim,),
            "action": (layout.action_dim,),
            "reward": (),
            "next_obs_actor": (layout.actor_obs_dim,),
            "next_obs_critic": (layout.critic_obs_dim,),
            "terminated": (),
        }
        tensors = {k: torch.zeros((c, n, *d), dtype=torch.float32, device=device) for k, d in dims.items()}
        # the tick each row holds (-1 = never written): lets tests prove which ticks were sampled
        tensors["tick"] = torch.full((c,), -1, dtype=torch.int64, device=device)
        if device.type == "cpu":
            for v in tensors.values():
                v.share_memory_()
        return cls(tensors, layout)

    def write(
        self,
        tick: int,
        obs: dict[str, torch.Tensor],
        action: torch.Tensor,
        reward: torch.Tensor,
        next_obs: dict[str, torch.Tensor],
        terminated: torch.Tensor,
    ) -> None:
        """Store one tick of transitions (no host sync)."""
        row = tick % self.capacity
        t = self.t
        t["obs_actor"][row].copy_(obs["actor"])
        t["obs_critic"][row].copy_(obs["critic"])
        t["action"][row].copy_(action)
        t["reward"][row].copy_(reward)
        t["next_obs_actor"][row].copy_(next_obs["actor"])
        t["next_obs_critic"][row].copy_(next_obs["critic"])
        t["terminated"][row].copy_(terminated)
        t["tick"][row].fill_(tick)

    def ticks_obs(self, lo: int, hi: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Observations of ticks [lo, hi) flattened to [(hi-lo)*N, dim] (for normaliser updates)."""
        rows = torch.arange(lo, hi, device=self.t["tick"].device) % self.capacity
        a = self.t["obs_actor"][rows].reshape(-1, self.layout.actor_obs_dim)
        c = self.t["obs_critic"][rows].reshape(-1, self.layout.critic_obs_dim)
        return a, c


class ReplaySampler:
    """Uniform sampling over the readable window, driven by device tensors so that it needs no host
    sync (and can later live inside a CUDA graph)."""

    def __init__(self, ring: ReplayRing, generator: torch.Generator, check_window: bool = False) -> None:
        self.ring = ring
        device = ring.t["tick"].device
        self.device = device
        self.generator = generator
        # [lo_tick, hi_tick) as a device tensor; refilled each iteration with copy_
        self.window = torch.zeros(2, dtype=torch.int64, device=device)
        self._window_host = torch.zeros(2, dtype=torch.int64)
        self.check_window = check_window
        self.violations = 0
        self.samples_checked = 0

    def set_window(self, lo: int, hi: int) -> None:
        if hi <= lo:
            raise ValueError(f"empty replay window [{lo}, {hi})")
        self._window_host[0], self._window_host[1] = lo, hi
        self.window.copy_(self._window_host)

    def sample(self, batch_size: int) -> Batch:
        n = self.ring.layout.num_envs
        lo, hi = self.window[0], self.window[1]
        count = (hi - lo) * n
        u = torch.rand(batch_size, generator=self.generator, device=self.device, dtype=torch.float64)
        flat = torch.minimum((u * count).long(), count - 1)
        tick = lo + torch.div(flat, n, rounding_mode="floor")
        env = flat % n
        row = tick % self.ring.capacity
        t = self.ring.t
        if self.check_window:
            self._check(row, lo, hi)
        return Batch(
            obs_actor=t["obs_actor"][row, env],
            obs_critic=t["obs_critic"][row, env],
            action=t["action"][row, env],
            reward=t["reward"][row, env],
            next_obs_actor=t["next_obs_actor"][row, env],
            next_obs_critic=t["next_obs_critic"][row, env],
            terminated=t["terminated"][row, env],
        )

    def _check(self, row: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> None:
        # debug only: a row whose stamp is outside [lo, hi) was either overwritten for a newer tick
        # (being written now) or is stale; both mean the protocol broke
        stamps = self.ring.t["tick"][row]
        bad = ((stamps < lo) | (stamps >= hi)).sum()
        self.violations += int(bad)
        self.samples_checked += int(row.numel())
