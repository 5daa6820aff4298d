"""The Task protocol: the task-specific half of a VecEnv, independent of the simulator backend.

A task reads the simulation only through a `Backend`'s torch views (qpos, qvel, sensordata, ...),
so the same task code runs on `mujoco` (CPU) and `mjwarp` (CUDA or CPU). Every method works on the
whole batch with fixed shapes (masks, never index lists) so a step has no host sync and no Python
loop over environments, and stays capturable in a CUDA graph.

The generic VecEnv calls, per step:
    ctrl = task.apply_action(actions, policy_actions)   # before physics
    backend.step(ctrl)
    rng = Uniforms(torch.rand(N, task.uniforms_per_step, generator=env.generator))  # one draw a step
    reward, terminated = task.reward(sim), task.terminated(sim)
    task.advance(sim, rng)                     # optional
    truncated |= task.truncated(sim)           # optional
    final_obs = task.observe(sim)
    qpos, qvel = task.reset(done, rng)         # candidates; only rows where done is True are used
    backend.reset_envs(done, qpos, qvel)
    obs = task.observe(sim) where done, final_obs elsewhere

Optional members a task may define (looked up with getattr; the pendulum has none):
    advance(sim, rng) -> None             per-step task state that must change *after* the reward of
                                          the step (e.g. redrawing a command the next obs shows)
    truncated(sim) -> [N] bool            the task's own time limit (a reference clip that ends)
    evaluate(sim) -> (reward, terminated, obs)
                                          the same as reward, terminated, advance, observe in that
                                          order, sharing work (one kinematics pass); used if present
    model_randomization(num_envs, generator) -> {MjModel field: [N, *shape]}
                                          per-env model fields drawn once at build (domain
                                          randomisation), applied with Backend.set_model_fields
    metrics(sim) -> [N, M]                per-env diagnostics in spec.metric_names order (Task/<name>)
    reward_and_metrics(sim) -> (reward, metrics)
                                          both from one pass (used if present, with metrics)
    mjwarp_put_data_kwargs: dict          contact/constraint capacities for MuJoCo Warp (nconmax, njmax)
    state_dict() / load_state_dict(state) the task's buffers, for exact resume
    state_keys() -> tuple[str, ...]       the names state_dict() returns, known before bind() (a
                                          resume checks a checkpoint against them before building)
Random numbers: a task declares `uniforms_per_step` (how many uniforms per env one step's advance()
and reset() draw together) and takes them from the `rng` (envs.base.Uniforms) it is handed.
"""

from __future__ import annotations

from typing import Protocol

import mujoco
import torch

from duorl.envs.backends.base import Backend
from duorl.envs.base import EnvSpec, Obs, Uniforms


class Task(Protocol):
    spec: EnvSpec
    # physics steps per control step: spec.control_dt == substeps * model timestep
    substeps: int
    # uniforms per env that one step's advance() and reset() draw together (Uniforms)
    uniforms_per_step: int

    def mj_model(self) -> mujoco.MjModel:
        """The MuJoCo model that a backend batches (built fresh on each call)."""
        ...

    def bind(self, num_envs: int, device: torch.device) -> None:
        """Allocate the task's per-env buffers (commands, last actions, phases) on `device`."""
        ...

    def reset(self, mask: torch.Tensor, rng: Uniforms) -> tuple[torch.Tensor, torch.Tensor]:
        """Reset the task's own buffers where mask [N] is True and return candidate initial
        qpos [N, nq] and qvel [N, nv] for the whole batch (rows where mask is False are ignored).
        Draws the same random numbers whatever the mask, so rollouts depend only on the seed."""
        ...

    def apply_action(self, actions: torch.Tensor, policy_actions: torch.Tensor | None = None) -> torch.Tensor:
        """actions [N, action_dim] in [-1, 1] -> ctrl [N, nu]; may keep them for rewards/obs.
        `policy_actions`: the policy's deterministic output behind `actions` (None: they are the same,
        no exploration). Smoothness penalties read these, so exploration noise is not penalised."""
        ...

    def observe(self, sim: Backend) -> Obs:
        """{"actor": [N, actor_obs_dim], "critic": [N, critic_obs_dim]} float32, a pure function of
        the simulation and task buffers (calling it twice gives the same obs)."""
        ...

    def reward(self, sim: Backend) -> torch.Tensor:
        """[N] float32 reward of the transition that just happened."""
        ...

    def terminated(self, sim: Backend) -> torch.Tensor:
        """[N] bool: the episode reached a terminal state (no bootstrapping past it)."""
        ...
