"""TaskVecEnv: the generic VecEnv (envs/base.py) composing a Task with a simulator Backend.

Everything in step() is whole-batch tensor work with fixed shapes: auto-reset is a masked write,
episode bookkeeping lives in device tensors, and counts stay tensors (no .item()), so a step never
syncs with the host and can later sit inside a CUDA graph.
"""

from __future__ import annotations

from typing import Any

import torch

from duorl.envs.backends.base import Backend
from duorl.envs.base import EnvSpec, Obs
from duorl.envs.tasks.base import Task


def _all_finite(t: torch.Tensor) -> torch.Tensor:
    """[N] bool: every entry of row i is finite."""
    return torch.isfinite(t).flatten(1).all(dim=1)


def _select(mask: torch.Tensor, a: Obs, b: Obs) -> Obs:
    """Per-env choice between two Obs: a where mask [N] is True, else b."""
    m = mask.unsqueeze(1)
    return {k: torch.where(m, a[k], b[k]) for k in b}


class TaskVecEnv:
    """A batch of `num_envs` episodes of one task on one backend; see envs/base.py for step().

    Reset noise comes from `self.generator` (on the env device, seeded once). Whoever captures
    step() into a torch CUDA graph registers it first: `graph.register_generator_state(env.generator)`.
    """

    def __init__(self, task: Task, backend: Backend, seed: int, nan_guard: bool = True) -> None:
        self.task = task
        self.backend = backend
        self.spec: EnvSpec = task.spec
        self.num_envs = backend.num_envs
        self.device = backend.device
        self.nan_guard = nan_guard
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(int(seed))
        task.bind(self.num_envs, self.device)

        n, dev = self.num_envs, self.device
        self._ep_return = torch.zeros(n, dtype=torch.float32, device=dev)
        self._ep_length = torch.zeros(n, dtype=torch.int64, device=dev)
        self._all = torch.ones(n, dtype=torch.bool, device=dev)
        self._zero_count = torch.zeros((), dtype=torch.int64, device=dev)
        self._max_steps = self.spec.max_episode_steps
        # optional: an object with a `phase(name)` context manager (the collector's PhaseTimer) that
        # times the physics alone; None costs nothing
        self.phase_timer: Any = None

    def _reset_where(self, mask: torch.Tensor) -> None:
        qpos, qvel = self.task.reset(mask, self.generator)
        self.backend.reset_envs(mask, qpos, qvel)

    def reset(self) -> Obs:
        """Start a new episode in every env."""
        self._reset_where(self._all)
        self._ep_return.zero_()
        self._ep_length.zero_()
        return self.task.observe(self.backend)

    def step(self, actions: torch.Tensor) -> tuple[Obs, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        task, sim = self.task, self.backend
        ctrl = task.apply_action(actions)
        if self.phase_timer is None:
            sim.step(ctrl)
        else:
            with self.phase_timer.phase("collector_backend_step_ms"):
                sim.step(ctrl)

        reward = task.reward(sim)
        terminated = task.terminated(sim)
        final_obs = task.observe(sim)
        self._ep_length += 1
        truncated = self._ep_length >= self._max_steps

        if self.nan_guard:
            bad = sim.diverged | ~_all_finite(sim.qpos) | ~_all_finite(sim.qvel) | ~torch.isfinite(reward)
            for v in final_obs.values():
                bad = bad | ~_all_finite(v)
            # A broken env ends as *truncated*, not terminated: its learner target must not be a
            # terminal one, and its final_obs (replaced below by the reset obs) is finite.
            reward = torch.where(bad, torch.zeros_like(reward), reward)
            terminated = terminated & ~bad
            truncated = truncated | bad
            nan_resets = bad.sum()
        else:
            bad = None
            nan_resets = self._zero_count.clone()

        self._ep_return += reward
        done = terminated | truncated
        episode_return = self._ep_return.clone()
        episode_length = self._ep_length.clone()
        self._ep_return.masked_fill_(done, 0.0)
        self._ep_length.masked_fill_(done, 0)

        self._reset_where(done)
        obs = _select(done, task.observe(sim), final_obs)
        if bad is not None:
            final_obs = _select(bad, obs, final_obs)

        info = {
            "final_obs": final_obs,
            "episode_return": episode_return,
            "episode_length": episode_length,
            "nan_resets": nan_resets,
        }
        return obs, reward, terminated, truncated, info

    def close(self) -> None:
        self.backend.close()
