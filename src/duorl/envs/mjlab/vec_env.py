"""MjlabVecEnv: mjlab's ManagerBasedRlEnv behind duorl's VecEnv contract (envs/base.py).

mjlab steps with auto_reset=False, so its step returns the state it reached for every env; that is
`final_obs` (a time-out bootstraps from it), and only then are the done envs reset, through mjlab's own
reset(env_ids) (its events, curricula and episode logs run as in mjlab). Terminated and timed-out stay
apart: mjlab's time-out terms truncate, its other terms terminate (a finite-horizon task's time-outs
terminate too, as mjlab's own wrapper treats them).

mjlab's step reads device values on the host (which envs are done, termination counts), so a step
cannot sit inside a CUDA graph: the collector runs its tick eagerly (`tick_capturable = False`; the
run manifest's `collector_tick_cuda_graph` records it). With sim.mjlab_staged_step (null: on for CUDA
envs) `step` goes through envs/mjlab/staged_step.py instead, which runs the same ops in stages whose
host-sync-free stretches are CUDA graphs, and `after_step` below is the wrapper code both paths share.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import torch

from duorl.config.errors import InputRefused
from duorl.config.switches import mjlab_staged_step_enabled
from duorl.envs.base import EnvSpec, Obs, VecEnv
from duorl.envs.mjlab.family import TICK_EAGER_REASON
from duorl.envs.vec_env import select_obs


@dataclass
class StepOutcome:
    """MjlabVecEnv.after_step: the step's results before the done envs are reset."""

    final_obs: Obs
    reward: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    done: torch.Tensor
    bad: torch.Tensor  # not finite: truncated, reward 0, final_obs replaced by the reset obs
    metrics: torch.Tensor | None
    episode_return: torch.Tensor
    episode_length: torch.Tensor

    def info(self, final_obs: Obs) -> dict[str, Any]:
        info: dict[str, Any] = {
            "final_obs": final_obs,
            "episode_return": self.episode_return,
            "episode_length": self.episode_length,
            "nan_resets": self.bad.sum(),
        }
        if self.metrics is not None:
            info["metrics"] = self.metrics
        return info


class MjlabVecEnv(VecEnv):
    """`num_envs` envs of one mjlab task; see envs/base.py for reset() and step()."""

    # mjlab's step syncs with the host: the collector tick runs eagerly (runtime/tick.py)
    tick_capturable = False
    tick_eager_reason = TICK_EAGER_REASON

    def __init__(self, env: Any, spec: EnvSpec, actor_groups: tuple[str, ...], critic_groups: tuple[str, ...],
                 rows: list[Any], finite_horizon: bool = False) -> None:
        self.env = env
        self.spec = spec
        self.num_envs = int(env.num_envs)
        self.device = torch.device(env.device)
        self._actor_groups, self._critic_groups = actor_groups, critic_groups
        self._rows = rows
        self._finite_horizon = finite_horizon
        n, dev = self.num_envs, self.device
        self._ep_return = torch.zeros(n, dtype=torch.float32, device=dev)
        self._ep_length = torch.zeros(n, dtype=torch.int64, device=dev)
        # mjlab's logged terms of the last reset (extras["log"]: means over the envs it reset)
        self.last_log: dict[str, Any] = {}
        # optional: the collector's PhaseTimer, timing mjlab's step alone as the backend step
        self.phase_timer: Any = None
        # the staged step (sim.mjlab_staged_step; envs/mjlab/staged_step.py), None: mjlab's own env.step
        self.staged: Any = None

    def obs_of(self, groups: dict[str, Any]) -> Obs:
        """duorl's Obs from mjlab's observation groups (the actor's groups, and the critic's); the staged
        step (staged_step.py) reads its fresh observations through it too."""
        actor = torch.cat([groups[g] for g in self._actor_groups], dim=-1).float()
        critic = (actor.clone() if self._critic_groups == self._actor_groups
                  else torch.cat([groups[g] for g in self._critic_groups], dim=-1).float())
        return {"actor": actor, "critic": critic}

    def reset(self) -> Obs:
        """Start a new episode in every env."""
        groups, extras = self.env.reset()
        self.last_log = dict(extras.get("log", {}))
        self._ep_return.zero_()
        self._ep_length.zero_()
        return self.obs_of(groups)

    def step(self, actions: torch.Tensor, policy_actions: torch.Tensor | None = None
             ) -> tuple[Obs, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        # actions in [-1, 1] are mjlab's raw actions: each term scales them itself (envs/mjlab/actions.py)
        if self.staged is not None:
            return self.staged.step(actions)
        if self.phase_timer is None:
            groups, reward, terminated, time_out, _ = self.env.step(actions)
        else:
            with self.phase_timer.phase("collector_backend_step_ms"):
                groups, reward, terminated, time_out, _ = self.env.step(actions)
        out = self.after_step(groups, reward, terminated, time_out)
        obs, final_obs = out.final_obs, out.final_obs
        ids = out.done.nonzero().squeeze(-1)  # a host sync, as mjlab's own step has
        if ids.numel() > 0:
            groups, extras = self.env.reset(env_ids=ids)
            self.last_log = dict(extras.get("log", {}))
            fresh = self.obs_of(groups)
            obs = select_obs(out.done, fresh, final_obs)
            final_obs = select_obs(out.bad, fresh, final_obs)
        return obs, out.reward, out.terminated, out.truncated, out.info(final_obs)

    def after_step(self, groups: dict[str, Any], reward: torch.Tensor, terminated: torch.Tensor,
                   time_out: torch.Tensor) -> "StepOutcome":
        """What duorl makes of mjlab's step before any reset (no host sync): the observation the step
        reached (every env), clones of mjlab's reused buffers, the Task/ rows, the finiteness check and
        the episode sums. The staged step (envs/mjlab/staged_step.py) runs the same code."""
        final_obs = self.obs_of(groups)  # the state the step reached, every env
        # mjlab reuses these buffers on its next step and reset
        reward = reward.float().clone()
        terminated, truncated = terminated.clone(), time_out.clone()
        if self._finite_horizon:
            terminated, truncated = terminated | truncated, torch.zeros_like(truncated)
        metrics = self._read_metrics()

        # an env whose state is not finite ends truncated (no terminal target), reward 0, and its
        # final_obs is replaced by its reset obs (the learner never sees a non-finite row)
        bad = ~torch.isfinite(reward)
        for v in final_obs.values():
            bad |= ~torch.isfinite(v).all(dim=1)
        reward = torch.where(bad, torch.zeros_like(reward), reward)
        terminated = terminated & ~bad
        truncated = truncated | bad

        self._ep_return += reward
        self._ep_length += 1
        done = terminated | truncated
        episode_return, episode_length = self._ep_return.clone(), self._ep_length.clone()
        self._ep_return.masked_fill_(done, 0.0)
        self._ep_length.masked_fill_(done, 0)
        return StepOutcome(final_obs, reward, terminated, truncated, done, bad, metrics, episode_return,
                           episode_length)

    def _read_metrics(self) -> torch.Tensor | None:
        if not self._rows:
            return None
        from duorl.envs.mjlab.metrics import read_metrics

        return read_metrics(self.env, self._rows)

    def render_frame(self) -> Any:
        """An RGB frame (H, W, 3 uint8) of the scene from mjlab's offscreen renderer, which follows its
        viewer settings (camera, env 0); the env must be built with `render=True`."""
        return self.env.render()

    def close(self) -> None:
        if self.staged is not None:
            self.staged.release()  # the graphs go before the env they read
        self.env.close()


def build_vec_env(task_id: str, task_cfg: Any, num_envs: int, device: str, seed: int, play: bool = False,
                  render: bool = False, staged_step: bool | None = None,
                  reset_graphs: bool | None = None) -> MjlabVecEnv:
    """See duorl.envs.mjlab.make_vec_env. The spec comes from the env built here (no second build), except
    under `play`: the play configuration's env reports the training configuration's Task/ rows, in their
    order (those of the spec the policy was trained with), and ends its episodes at its own length. A
    training env's spec is checked against the spec cache a learner may have sized itself by and rewrites
    it (spec_cache.confirm: StaleSpecCache where they differ)."""
    from dataclasses import replace

    from duorl.envs.mjlab.loader import build_env, env_cfg, registry
    from duorl.envs.mjlab.spec import describe, obs_groups, refuse_untrainable, task_spec
    from duorl.envs.mjlab.spec_cache import StaleSpecCache, confirm

    if num_envs < 1:
        raise ValueError(f"num_envs must be >= 1, got {num_envs}")
    if task_id not in registry().list_tasks():
        raise ValueError(f"mjlab:{task_id} is not in mjlab's registry")
    cfg = env_cfg(task_id, task_cfg, num_envs, seed, play=play)
    groups = obs_groups(task_id, cfg)
    refuse_untrainable(task_id, cfg, groups)
    env = build_env(cfg, device, render)
    spec, rows, dropped = describe(task_id, env, groups)
    if not play:  # the env's spec is the truth: the cache a learner read is checked against it, and rewritten
        try:
            confirm(task_id, task_cfg, spec, dropped)
        except StaleSpecCache:
            env.close()
            raise
    if play:
        trained = task_spec(task_id, task_cfg)
        by_name = {r.name: r for r in rows}
        missing = [n for n in trained.metric_names if n not in by_name]
        if missing:
            env.close()
            raise ValueError(f"mjlab:{task_id}'s play configuration does not log {missing}, which its training "
                             "configuration logs")
        rows = [by_name[n] for n in trained.metric_names]
        spec = replace(trained, max_episode_steps=spec.max_episode_steps)
    vec = MjlabVecEnv(env, spec, groups.actor, groups.critic, rows, finite_horizon=bool(cfg.is_finite_horizon))
    if mjlab_staged_step_enabled(True, staged_step, device):
        attach_staged_step(vec, required=staged_step is True, reset_graphs=reset_graphs)
    return vec


def attach_staged_step(vec: MjlabVecEnv, required: bool, graphs: str | None = None,
                       reset_graphs: bool | None = None) -> None:
    """Step `vec` through envs/mjlab/staged_step.py: its graph stages as CUDA graphs on CUDA, eagerly on
    the CPU (`graphs` overrides: "none", "cuda", "cpu-replay"; `reset_graphs`: the reset body as a graph per
    number of done envs, None: staged_step.RESET_GRAPHS_BY_MODE). A task it cannot stage keeps mjlab's own
    step, with a note; `required` (sim.mjlab_staged_step=true) refuses it instead."""
    from duorl.envs.mjlab.staged_step import StagedStep, StagedStepUnsupported

    mode = graphs or ("cuda" if vec.device.type == "cuda" else "none")
    try:
        vec.staged = StagedStep(vec, mode, reset_graphs)
    except StagedStepUnsupported as e:
        if required:
            vec.close()
            raise InputRefused(f"sim.mjlab_staged_step=true: {vec.spec.task} cannot step in stages: {e}. "
                               "Fix: set sim.mjlab_staged_step=false (or null)") from None
        print(f"duorl: note: {vec.spec.task} keeps mjlab's own step (sim.mjlab_staged_step): {e}",
              file=sys.stderr, flush=True)
        return
