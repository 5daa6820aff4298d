"""Task factories that break the Task contract in the ways a new user's task does (issue #39), reached by
import path (`--task tests.envs.bad_tasks:NAME`): each is the builtin pendulum with one member changed.
tests/test_bad_input.py refuses the ones the probe can see (NaN or inf from the first step included);
tests/runtime/test_task_nan.py runs the ones only a run can see (NaN after some steps)."""

from __future__ import annotations

import dataclasses
import os
import time
from types import SimpleNamespace

import mujoco
import torch

from duorl.config.schema import TaskConfig
from duorl.envs.tasks.pendulum import PendulumSwingup, model_path


class _Steps(PendulumSwingup):
    """Counts its steps in a device tensor (no host sync), for members that break after some steps."""

    def bind(self, num_envs, device):  # type: ignore[no-untyped-def]
        super().bind(num_envs, device)
        self._steps = torch.zeros((), dtype=torch.int64, device=device)

    def apply_action(self, actions, policy_actions=None):  # type: ignore[no-untyped-def]
        self._steps += 1
        return super().apply_action(actions, policy_actions)

    def _nan_after(self, t: torch.Tensor, steps: int) -> torch.Tensor:
        return torch.where(self._steps > steps, torch.full_like(t, float("nan")), t)


# -- non-finite values (only a run sees those that start late)
class _NanObs(PendulumSwingup):
    def observe(self, sim):  # type: ignore[no-untyped-def]
        return {k: torch.full_like(v, float("nan")) for k, v in super().observe(sim).items()}


def nan_obs(cfg: TaskConfig) -> PendulumSwingup:
    """NaN observations from the start."""
    return _NanObs(cfg.max_episode_steps)


class _InfReward(PendulumSwingup):
    def reward(self, sim):  # type: ignore[no-untyped-def]
        return torch.full_like(super().reward(sim), float("inf"))


def inf_reward(cfg: TaskConfig) -> PendulumSwingup:
    """An infinite reward from the start."""
    return _InfReward(cfg.max_episode_steps)


class _NanRewardLate(_Steps):
    def reward(self, sim):  # type: ignore[no-untyped-def]
        return self._nan_after(super().reward(sim), 50)


def nan_reward_late(cfg: TaskConfig) -> PendulumSwingup:
    """A NaN reward in every env from its 51st step on."""
    return _NanRewardLate(cfg.max_episode_steps)


class _NanObsLate(_Steps):
    def observe(self, sim):  # type: ignore[no-untyped-def]
        return {k: self._nan_after(v, 60) for k, v in super().observe(sim).items()}


def nan_obs_late(cfg: TaskConfig) -> PendulumSwingup:
    """NaN observations in every env from its 61st step on."""
    return _NanObsLate(cfg.max_episode_steps)


class _NanRewardRare(PendulumSwingup):
    def bind(self, num_envs, device):  # type: ignore[no-untyped-def]
        super().bind(num_envs, device)
        self._steps = torch.zeros((), dtype=torch.int64, device=device)

    def reward(self, sim):  # type: ignore[no-untyped-def]
        self._steps += 1
        r = super().reward(sim)
        once = (self._steps == 30) & (torch.arange(r.shape[0], device=r.device) == 0)
        return torch.where(once, torch.full_like(r, float("nan")), r)


def nan_reward_once(cfg: TaskConfig) -> PendulumSwingup:
    """One NaN reward, in env 0 at step 30: a few NaN resets are counted and warned once."""
    return _NanRewardRare(cfg.max_episode_steps)


# -- contract breaks the probe sees
class _WideQpos(PendulumSwingup):
    def reset(self, mask, rng):  # type: ignore[no-untyped-def]
        qpos, qvel = super().reset(mask, rng)
        return torch.cat((qpos, qpos), dim=1), qvel


def wide_qpos(cfg: TaskConfig) -> PendulumSwingup:
    return _WideQpos(cfg.max_episode_steps)


class _FloatReward(PendulumSwingup):
    def reward(self, sim):  # type: ignore[no-untyped-def]
        return 0.5


def float_reward(cfg: TaskConfig) -> PendulumSwingup:
    return _FloatReward(cfg.max_episode_steps)


class _ColumnReward(PendulumSwingup):
    def reward(self, sim):  # type: ignore[no-untyped-def]
        return super().reward(sim).unsqueeze(1)


def column_reward(cfg: TaskConfig) -> PendulumSwingup:
    return _ColumnReward(cfg.max_episode_steps)


class _FloatTerminated(PendulumSwingup):
    def terminated(self, sim):  # type: ignore[no-untyped-def]
        return super().terminated(sim).float()


def float_terminated(cfg: TaskConfig) -> PendulumSwingup:
    return _FloatTerminated(cfg.max_episode_steps)


class _ColumnTerminated(PendulumSwingup):
    def terminated(self, sim):  # type: ignore[no-untyped-def]
        return super().terminated(sim).unsqueeze(1)


def column_terminated(cfg: TaskConfig) -> PendulumSwingup:
    return _ColumnTerminated(cfg.max_episode_steps)


class _WideCtrl(PendulumSwingup):
    def apply_action(self, actions, policy_actions=None):  # type: ignore[no-untyped-def]
        u = super().apply_action(actions, policy_actions)
        return torch.cat((u, u), dim=1)


def wide_ctrl(cfg: TaskConfig) -> PendulumSwingup:
    return _WideCtrl(cfg.max_episode_steps)


class _NoActuators(PendulumSwingup):
    def mj_model(self) -> mujoco.MjModel:
        spec = mujoco.MjSpec.from_file(model_path())
        for actuator in list(spec.actuators):
            spec.delete(actuator)
        return spec.compile()


def no_actuators(cfg: TaskConfig) -> PendulumSwingup:
    return _NoActuators(cfg.max_episode_steps)


class _TupleObs(PendulumSwingup):
    def observe(self, sim):  # type: ignore[no-untyped-def]
        obs = super().observe(sim)
        return obs["actor"], obs["critic"]


def tuple_obs(cfg: TaskConfig) -> PendulumSwingup:
    return _TupleObs(cfg.max_episode_steps)


# -- specs that contradict the task
def wrong_control_dt(cfg: TaskConfig) -> PendulumSwingup:
    """control_dt 0.02 s where substeps * timestep = 5 * 0.01 s."""
    task = PendulumSwingup(cfg.max_episode_steps)
    task.spec = dataclasses.replace(task.spec, control_dt=0.02)
    return task


def fake_mirror(cfg: TaskConfig) -> PendulumSwingup:
    """A mirror not built with envs.base.Mirror, which is no involution (index 0 -> 1 -> 2 -> 0)."""
    task = PendulumSwingup(cfg.max_episode_steps)
    perm = ((1, 2, 0), (1.0, 1.0, 1.0))
    object.__setattr__(task.spec, "mirror", SimpleNamespace(actor_obs=perm, critic_obs=perm, action=((0,), (-1.0,))))
    return task


def ignores_max_episode_steps(cfg: TaskConfig) -> PendulumSwingup:
    """Always 200-step episodes, whatever task.max_episode_steps says."""
    return PendulumSwingup()


def slow(cfg: TaskConfig) -> PendulumSwingup:
    """Takes DUORL_TEST_SLOW_S seconds (default 60) to build."""
    time.sleep(float(os.environ.get("DUORL_TEST_SLOW_S", "60")))
    return PendulumSwingup(cfg.max_episode_steps)


CALLS = [0]


def counted(cfg: TaskConfig) -> PendulumSwingup:
    """Counts its calls in CALLS (a run's checks build the task once)."""
    CALLS[0] += 1
    return PendulumSwingup(cfg.max_episode_steps)
