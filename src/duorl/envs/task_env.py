"""A Task on duorl's own backends: the backend a sim name picks, the TaskVecEnv they make, and the
contract probe that steps a package's task once before a run starts.

The task sources that return a Task (builtin, entry point, import path: envs/task_sources.py) build here;
an mjlab task builds its own VecEnv (envs/mjlab/).
"""

from __future__ import annotations

from typing import Any

import torch

from duorl.config.errors import ConfigError, InputRefused
from duorl.config.schema import SIMS, SimConfig
from duorl.envs.base import VecEnv
from duorl.envs.tasks.base import Task
from duorl.envs.vec_env import TaskVecEnv


def build_task_vec_env(task: Task, sim_cfg: SimConfig, num_envs: int, device: str, seed: int,
                       nan_guard: bool = True, nan_inject_step: int = -1, compile: bool = False,
                       solver_early_exit: bool = False) -> VecEnv:
    """`num_envs` envs of the unbound `task` on `sim_cfg.name`, tensors on `device` (registry.make_vec_env
    says what each argument means)."""
    if sim_cfg.name not in SIMS:
        raise ValueError(f"sim.name={sim_cfg.name!r} is not known; allowed values: {', '.join(SIMS)}")
    if num_envs < 1:
        raise ValueError(f"num_envs must be >= 1, got {num_envs}")
    dev = torch.device(device)
    model = task.mj_model()
    if sim_cfg.name == "mujoco":
        if dev.type != "cpu":
            raise ValueError(f"sim.name='mujoco' steps on CPU threads: device must be 'cpu', got {device!r}")
        from duorl.envs.backends.mujoco_cpu import MujocoBackend

        if sim_cfg.nthread < 0:
            raise ValueError(f"sim.nthread={sim_cfg.nthread} must be >= 0 (0 = all cores)")
        if solver_early_exit:
            raise ValueError("sim.solver_early_exit is a MuJoCo Warp option (sim.name=mjwarp), not the mujoco backend's")
        backend: Any = MujocoBackend(model, num_envs, task.substeps, nthread=sim_cfg.nthread)
    else:
        from duorl.envs.backends.mjwarp import MjWarpBackend

        # contact-rich tasks (the G1) size MuJoCo Warp's contact and constraint buffers
        backend = MjWarpBackend(model, num_envs, task.substeps, dev,
                                put_data_kwargs=getattr(task, "mjwarp_put_data_kwargs", None),
                                early_exit=solver_early_exit)
    return TaskVecEnv(task, backend, seed=seed, nan_guard=nan_guard, nan_inject_step=nan_inject_step, compile=compile)


def probe_task(task: Task, name: str) -> None:
    """Step `task` (unbound, from a package's factory) once in two MuJoCo C worlds and check what it returns
    against the Task contract (observation keys, shapes, float32 dtype; reward, terminated and ctrl
    shapes), so a task that breaks it is refused in one line (ConfigError naming task.name=`name`) before a
    run starts, not inside the collector."""
    from duorl.envs.backends.mujoco_cpu import MujocoBackend

    spec, n = task.spec, 2
    problems: list[str] = []
    try:
        model = task.mj_model()
        env = TaskVecEnv(task, MujocoBackend(model, n, task.substeps, nthread=1), seed=0, nan_guard=False)
        try:
            obs = env.reset()
            ctrl = task.apply_action(torch.zeros(n, spec.action_dim))
            if tuple(ctrl.shape) != (n, model.nu):
                problems.append(f"apply_action returned ctrl of shape {tuple(ctrl.shape)}, the model has nu={model.nu}")
            obs2, reward, terminated, _, _ = env.step(torch.zeros(n, spec.action_dim))
        finally:
            env.close()
    except InputRefused:
        raise
    except Exception as e:  # noqa: BLE001 - the user's task: name it and its error
        raise ConfigError("task.name", name, f"stepping the task once raised {type(e).__name__}: {_first_line(e)}",
                          "a task that obeys the Task contract", "fix the task (docs/tasks.md)") from None
    for when, o in (("reset", obs), ("step", obs2)):
        if not isinstance(o, dict) or set(o) != {"actor", "critic"}:
            problems.append(f"observe() after {when} returned {type(o).__name__} {sorted(o) if isinstance(o, dict) else ''}"
                            ", not {'actor', 'critic'}")
            continue
        for key, dim in (("actor", spec.actor_obs_dim), ("critic", spec.critic_obs_dim)):
            t = o[key]
            if not isinstance(t, torch.Tensor) or t.dtype != torch.float32 or tuple(t.shape) != (n, dim):
                got = f"{t.dtype} {tuple(t.shape)}" if isinstance(t, torch.Tensor) else type(t).__name__
                problems.append(f"obs[{key!r}] is {got}, the spec says float32 ({n}, {dim})")
    if reward.dtype != torch.float32 or tuple(reward.shape) != (n,):
        problems.append(f"reward is {reward.dtype} {tuple(reward.shape)}, not float32 ({n},)")
    if terminated.dtype != torch.bool or tuple(terminated.shape) != (n,):
        problems.append(f"terminated is {terminated.dtype} {tuple(terminated.shape)}, not bool ({n},)")
    if problems:
        raise ConfigError("task.name", name, "duorl cannot train it: " + "; ".join(dict.fromkeys(problems)),
                          "the Task contract (docs/tasks.md)", "fix the task")


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else "(no message)"
