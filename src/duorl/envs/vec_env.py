"""TaskVecEnv: the generic VecEnv (envs/base.py) composing a Task with a simulator Backend.

Everything in step() is whole-batch tensor work with fixed shapes: auto-reset is a masked write,
episode bookkeeping lives in device tensors, and counts stay tensors (no .item()), so a step never
syncs with the host and can later sit inside a CUDA graph.
"""

from __future__ import annotations

from typing import Any

import torch

from duorl.gpu.compiling import maybe_compile
from duorl.envs.backends.base import Backend
from duorl.envs.base import NON_FINITE_PARTS, EnvSpec, Obs, Uniforms, VecEnv
from duorl.envs.tasks.base import Task


# each part's bit in the NaN guard's mask (envs/base.py NON_FINITE_PARTS)
_BIT = {part: i for i, part in enumerate(NON_FINITE_PARTS)}


def _all_finite(t: torch.Tensor) -> torch.Tensor:
    """[N] bool: every entry of row i is finite."""
    return torch.isfinite(t).flatten(1).all(dim=1)


def select_obs(mask: torch.Tensor, a: Obs, b: Obs) -> Obs:
    """Per-env choice between two Obs: a where mask [N] is True, else b."""
    m = mask.unsqueeze(1)
    return {k: torch.where(m, a[k], b[k]) for k in b}


class _NanSnapshot:
    """The first non-finite env state the NaN guard met, kept once, in preallocated device buffers.

    record() is branch-free tensor work (no host sync): where `taken` is still False and some env
    is bad, the lowest-index bad env's state before the step, its action, its state after the
    step, observations and raw reward are copied in and `taken` becomes True; later bad envs are
    only counted (info["nan_resets"]). Whoever already syncs (the collector at publish time) checks
    `bool(env.nan_snapshot.taken)` and, once, saves `env.nan_snapshot.tensors()` to the run dir and reads
    `facts()`: which parts were not finite (envs/base.py NON_FINITE_PARTS) and at which step, what a run
    that fails on it names (runtime/task_finiteness.py).
    """

    def __init__(self, n: int, backend: Backend, spec: EnvSpec, device: torch.device) -> None:
        f = dict(device=device)
        self.taken = torch.zeros((), dtype=torch.bool, **f)
        self.env_index = torch.full((), -1, dtype=torch.int64, **f)
        self.qpos = torch.zeros(backend.qpos.shape[1], dtype=backend.qpos.dtype, **f)
        self.qvel = torch.zeros(backend.qvel.shape[1], dtype=backend.qvel.dtype, **f)
        # the state the bad step started from: with `action`, a reproducer (MuJoCo C resets a
        # diverged world itself, so the state after the step is not the interesting one there)
        self.qpos_before = torch.zeros_like(self.qpos)
        self.qvel_before = torch.zeros_like(self.qvel)
        self._pre_qpos = torch.zeros_like(backend.qpos)
        self._pre_qvel = torch.zeros_like(backend.qvel)
        self.obs_actor = torch.zeros(spec.actor_obs_dim, **f)
        self.obs_critic = torch.zeros(spec.critic_obs_dim, **f)
        self.reward = torch.zeros((), **f)
        self.action = torch.zeros(spec.action_dim, **f)
        # True: the simulator itself flagged the env (Backend.diverged: MuJoCo C reset the world, or
        # MuJoCo Warp overflowed a capacity); False: a non-finite state, observation or reward
        self.diverged = torch.zeros((), dtype=torch.bool, **f)
        # what was not finite in that env (a bit mask over NON_FINITE_PARTS), the env's step that found
        # it (1-based, counted since this env was built) and that env's episode step (1-based)
        self.members = torch.zeros((), dtype=torch.int64, **f)
        self.step = torch.zeros((), dtype=torch.int64, **f)
        self.episode_step = torch.zeros((), dtype=torch.int64, **f)
        self._steps = torch.zeros((), dtype=torch.int64, **f)
        self._arange = torch.arange(n, **f)

    def record(self, bad: torch.Tensor, sim: Backend, obs: Obs, reward: torch.Tensor, action: torch.Tensor,
               members: torch.Tensor, episode_length: torch.Tensor) -> None:
        """One step's verdict: `bad` [N] bool, `members` [N] int64 (NON_FINITE_PARTS bits),
        `episode_length` [N] (each env's episode step, this one counted)."""
        self._steps += 1
        take = bad.any() & ~self.taken
        # lowest bad index (n where none is bad, then clamped: the copy is masked off anyway)
        i = torch.where(bad, self._arange, bad.numel()).min().clamp_max(bad.numel() - 1)
        for buf, src in ((self.qpos, sim.qpos), (self.qvel, sim.qvel), (self.obs_actor, obs["actor"]),
                         (self.obs_critic, obs["critic"]), (self.action, action.to(self.action.dtype)),
                         (self.qpos_before, self._pre_qpos), (self.qvel_before, self._pre_qvel)):
            buf.copy_(torch.where(take, src.index_select(0, i.view(1))[0].to(buf.dtype), buf))
        self.reward.copy_(torch.where(take, reward.index_select(0, i.view(1))[0].float(), self.reward))
        self.diverged.copy_(torch.where(take, sim.diverged.index_select(0, i.view(1))[0], self.diverged))
        self.env_index.copy_(torch.where(take, i, self.env_index))
        self.members.copy_(torch.where(take, members.index_select(0, i.view(1))[0], self.members))
        self.episode_step.copy_(torch.where(take, episode_length.index_select(0, i.view(1))[0], self.episode_step))
        self.step.copy_(torch.where(take, self._steps, self.step))
        self.taken |= take

    def before_step(self, sim: Backend) -> None:
        self._pre_qpos.copy_(sim.qpos)
        self._pre_qvel.copy_(sim.qvel)

    def facts(self) -> dict[str, Any]:
        """What the first broken env had (host values, one transfer: call only after a sync, once `taken`):
        `mask` and `parts` (its names, from NON_FINITE_PARTS), `step` (the env's step, 1-based since it was built),
        `episode_step` and `env_index`."""
        mask, step, episode_step, env_index = torch.stack(
            (self.members, self.step, self.episode_step, self.env_index)).tolist()
        return {"mask": mask, "parts": tuple(p for b, p in enumerate(NON_FINITE_PARTS) if mask >> b & 1), "step": step,
                "episode_step": episode_step, "env_index": env_index}

    def tensors(self) -> dict[str, torch.Tensor]:
        """CPU copies for saving (torch.save / safetensors): call only where a host sync is fine."""
        names = ("env_index", "qpos_before", "qvel_before", "action", "qpos", "qvel", "obs_actor", "obs_critic",
                 "reward", "diverged")
        return {k: getattr(self, k).detach().cpu().clone() for k in names}


class TaskVecEnv(VecEnv):
    """A batch of `num_envs` episodes of one task on one backend; see envs/base.py for step().

    Reset noise comes from `self.generator` (on the env device, seeded once). Whoever captures
    step() into a torch CUDA graph registers it first: `graph.register_generator_state(env.generator)`.
    """

    def __init__(self, task: Task, backend: Backend, seed: int, nan_guard: bool = True, nan_inject_step: int = -1,
                 compile: bool = False) -> None:
        self.task = task
        self.backend = backend
        self.spec: EnvSpec = task.spec
        self.num_envs = backend.num_envs
        self.device = backend.device
        self.nan_guard = nan_guard
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(int(seed))
        task.bind(self.num_envs, self.device)
        # per-env model fields (friction, masses) drawn once from the seeded stream, so a rebuilt
        # env (resume) gets the same worlds before the generator state is restored
        randomize = getattr(task, "model_randomization", None)
        if randomize is not None:
            fields = randomize(self.num_envs, self.generator)
            if fields:
                backend.set_model_fields(fields)
        # the model is final: the backend may start compiling its first step's kernels (in the background,
        # while the rest of start-up goes on)
        backend.prepare_kernels()
        # optional per-step hooks (envs/tasks/base.py): advance() after rewards/terminations,
        # truncated() for a task's own time limits (e.g. a reference clip that ends)
        self._advance = getattr(task, "advance", None)
        # evaluate(sim) -> (reward, terminated, obs): reward, terminated, advance and observe in one
        self._evaluate = getattr(task, "evaluate", None)
        self._task_truncated = getattr(task, "truncated", None)
        # metrics(sim) -> [N, M]: per-env diagnostics of the post-step state, in spec.metric_names order
        self._metrics = getattr(task, "metrics", None) if self.spec.metric_names else None
        # reward_and_metrics(sim) -> (reward, metrics): both from one pass, when the metrics break the
        # reward down (the G1 walking task's Task/rew_*)
        self._reward_and_metrics = getattr(task, "reward_and_metrics", None) if self._metrics is not None else None

        n, dev = self.num_envs, self.device
        self._ep_return = torch.zeros(n, dtype=torch.float32, device=dev)
        self._ep_length = torch.zeros(n, dtype=torch.int64, device=dev)
        self._all = torch.ones(n, dtype=torch.bool, device=dev)
        self._zero_count = torch.zeros((), dtype=torch.int64, device=dev)
        self._max_steps = self.spec.max_episode_steps
        # NaN guard evidence: the first env found broken, as it was before its reset (see nan_snapshot)
        self.nan_snapshot = _NanSnapshot(n, backend, self.spec, dev)
        # debug.nan_inject_step: a test hook that breaks env 0 once, by a device-side comparison (no sync)
        self._nan_inject_step = int(nan_inject_step)
        self._steps_taken = torch.zeros((), dtype=torch.int64, device=dev)
        # optional: an object with a `phase(name)` context manager (the collector's PhaseTimer) that
        # times the physics alone; None costs nothing
        self.phase_timer: Any = None
        # sim.tick_compile: the tensor code around the physics, compiled into a few fused kernels
        # (the task's rewards, observations and resets are hundreds of small ops per step, which a
        # captured tick would replay one by one). The step's random numbers are one eager draw from
        # `generator` before the compiled piece (Uniforms), so the random stream is the same either
        # way and nothing inside splits the compiled graph.
        self._uniforms_per_step = int(getattr(task, "uniforms_per_step", 0))
        self.compiled = bool(compile)
        self._before_physics = maybe_compile(self._before_physics_eager, self.compiled)
        self._after_physics = maybe_compile(self._after_physics_eager, self.compiled)

    def _draw_uniforms(self) -> torch.Tensor:
        """This step's random numbers [N, uniforms_per_step], one draw from the env's generator."""
        return torch.rand(self.num_envs, self._uniforms_per_step, generator=self.generator, device=self.device)

    def _reset_where(self, mask: torch.Tensor, rng: Uniforms) -> None:
        qpos, qvel = self.task.reset(mask, rng)
        self.backend.reset_envs(mask, qpos, qvel)

    def reset(self) -> Obs:
        """Start a new episode in every env."""
        self._reset_where(self._all, Uniforms(self._draw_uniforms()))
        self._ep_return.zero_()
        self._ep_length.zero_()
        return self.task.observe(self.backend)

    def step(self, actions: torch.Tensor, policy_actions: torch.Tensor | None = None
             ) -> tuple[Obs, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        ctrl = self._before_physics(actions, policy_actions)
        if self.phase_timer is None:
            self.backend.step(ctrl)
        else:
            with self.phase_timer.phase("collector_backend_step_ms"):
                self.backend.step(ctrl)
        return self._after_physics(actions, self._draw_uniforms())

    def _before_physics_eager(self, actions: torch.Tensor, policy_actions: torch.Tensor | None = None) -> torch.Tensor:
        """The task's action transform (and the NaN hooks' bookkeeping): the controls to simulate."""
        sim = self.backend
        if self._nan_inject_step >= 0:
            hit = self._steps_taken == self._nan_inject_step
            sim.qvel[:1].copy_(torch.where(hit, torch.full_like(sim.qvel[:1], float("nan")), sim.qvel[:1]))
            self._steps_taken += 1
        if self.nan_guard:
            self.nan_snapshot.before_step(sim)
        return self.task.apply_action(actions, policy_actions)

    def _after_physics_eager(self, actions: torch.Tensor, uniforms: torch.Tensor
                             ) -> tuple[Obs, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Rewards, terminations, the NaN guard, episode bookkeeping and auto-reset of the state the
        physics just reached; `uniforms` [N, uniforms_per_step]: the step's random numbers."""
        task, sim = self.task, self.backend
        rng = Uniforms(uniforms)
        # metrics before advance(): a task may redraw what they compare against (a walking command)
        reward, metrics = None, None
        if self._reward_and_metrics is not None and self._evaluate is None:  # one pass: metrics break the reward down
            reward, metrics = self._reward_and_metrics(sim)
        elif self._metrics is not None:
            metrics = self._metrics(sim)
        if self._evaluate is not None:  # one pass for reward, terminated, advance, observe
            reward, terminated, final_obs = self._evaluate(sim)
        else:
            reward = task.reward(sim) if reward is None else reward
            terminated = task.terminated(sim)
            if self._advance is not None:
                self._advance(sim, rng)
            final_obs = task.observe(sim)
        self._ep_length += 1
        truncated = self._ep_length >= self._max_steps
        if self._task_truncated is not None:
            truncated = truncated | self._task_truncated(sim)

        if self.nan_guard:
            # each part apart (NON_FINITE_PARTS' bits), so that the first broken env names what broke
            state_bad = ~_all_finite(sim.qpos) | ~_all_finite(sim.qvel)
            reward_bad = ~torch.isfinite(reward)
            obs_bad = torch.zeros_like(reward_bad)
            for v in final_obs.values():
                obs_bad = obs_bad | ~_all_finite(v)
            bad = state_bad | sim.diverged | reward_bad | obs_bad
            members = (state_bad.long() << _BIT["state"] | sim.diverged.long() << _BIT["diverged"]
                       | reward_bad.long() << _BIT["reward"] | obs_bad.long() << _BIT["observe"])
            self.nan_snapshot.record(bad, sim, final_obs, reward, actions, members, self._ep_length)
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

        self._reset_where(done, rng)
        obs = select_obs(done, task.observe(sim), final_obs)
        if bad is not None:
            final_obs = select_obs(bad, obs, final_obs)

        info = {
            "final_obs": final_obs,
            "episode_return": episode_return,
            "episode_length": episode_length,
            "nan_resets": nan_resets,
        }
        if metrics is not None:
            info["metrics"] = metrics.float()  # [N, M]
        return obs, reward, terminated, truncated, info

    def state_dict(self) -> dict[str, Any]:
        """Everything the next step depends on (for exact resume): physics state, task state,
        episode counters and the reset generator. Clones, no host sync."""
        out: dict[str, Any] = {
            "backend": self.backend.state_dict(),
            "ep_return": self._ep_return.clone(),
            "ep_length": self._ep_length.clone(),
            "generator": self.generator.get_state(),
        }
        if hasattr(self.task, "state_dict"):
            out["task"] = self.task.state_dict()
        return out

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.backend.load_state_dict(state["backend"])
        self._ep_return.copy_(state["ep_return"])
        self._ep_length.copy_(state["ep_length"])
        self.generator.set_state(state["generator"])
        if "task" in state:
            self.task.load_state_dict(state["task"])

    def close(self) -> None:
        self.backend.close()
