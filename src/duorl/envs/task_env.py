"""A Task on duorl's own backends: the backend a sim name picks and the TaskVecEnv they make (the contract
probe that steps a package's task once before a run starts is envs/task_probe.py).

The task sources that return a Task (builtin, entry point, import path: envs/task_sources.py) build here;
an mjlab task builds its own VecEnv (envs/mjlab/).
"""

from __future__ import annotations

from typing import Any

import torch

from duorl.config.schema import SIMS, SimConfig
from duorl.envs.base import VecEnv
from duorl.envs.tasks.base import Task
from duorl.envs.vec_env import TaskVecEnv
from duorl.startup_phases import PHASES


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
    with PHASES.part("model"):  # the start-up record's parts of the collector's env phase
        model = task.mj_model()
    with PHASES.part("simulator"):
        backend = _backend(task, model, sim_cfg, num_envs, dev, solver_early_exit)
    with PHASES.part("wrapper"):
        return TaskVecEnv(task, backend, seed=seed, nan_guard=nan_guard, nan_inject_step=nan_inject_step, compile=compile)


def _backend(task: Task, model: Any, sim_cfg: SimConfig, num_envs: int, dev: torch.device,
             solver_early_exit: bool) -> Any:
    """The simulator `sim_cfg.name` picks, holding `num_envs` worlds of `model` on `dev`."""
    if sim_cfg.name == "mujoco":
        if dev.type != "cpu":
            raise ValueError(f"sim.name='mujoco' steps on CPU threads: device must be 'cpu', got {str(dev)!r}")
        from duorl.envs.backends.mujoco_cpu import MujocoBackend

        if sim_cfg.nthread < 0:
            raise ValueError(f"sim.nthread={sim_cfg.nthread} must be >= 0 (0 = all cores)")
        if solver_early_exit:
            raise ValueError("sim.solver_early_exit is a MuJoCo Warp option (sim.name=mjwarp), not the mujoco backend's")
        return MujocoBackend(model, num_envs, task.substeps, nthread=sim_cfg.nthread)
    from duorl.envs.backends.mjwarp import MjWarpBackend

    # contact-rich tasks (the G1) size MuJoCo Warp's contact and constraint buffers
    return MjWarpBackend(model, num_envs, task.substeps, dev, put_data_kwargs=getattr(task, "mjwarp_put_data_kwargs", None),
                         early_exit=solver_early_exit)
