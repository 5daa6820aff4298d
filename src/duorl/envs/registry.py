"""Names to tasks and simulator backends; the one entry point that builds a VecEnv.

`make_vec_env` is a module-level function of plain dataclasses and builtins so that
`functools.partial(make_vec_env, ...)` pickles into the spawned collector process.
"""

from __future__ import annotations

import torch

from duorl.config.schema import SimConfig, TaskConfig
from duorl.envs import task_sources
from duorl.envs.base import EnvSpec, VecEnv
from duorl.envs.tasks.base import Task
from duorl.envs.vec_env import TaskVecEnv

TASKS: tuple[str, ...] = tuple(task_sources.BUILTIN)  # the builtin tasks (others: envs/task_sources.py)
SIMS: tuple[str, ...] = ("mujoco", "mjwarp")


def _check(key: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{key}={value!r} is not known; allowed values: {', '.join(allowed)}")


def make_task(task_cfg: TaskConfig) -> Task:
    """A fresh, unbound task for `task_cfg` from its source (cheap: parses nothing until a backend asks).
    ConfigError for a name no source resolves, or an mjlab task (a whole VecEnv, no Task)."""
    return task_sources.make_task(task_cfg)


def env_spec(task_cfg: TaskConfig) -> EnvSpec:
    """Shapes and timing of the configured task, without building any simulation."""
    return task_sources.task_spec(task_cfg)


def default_sim() -> str:
    """'mjwarp' where CUDA is present, else 'mujoco' (MuJoCo C on CPU threads)."""
    return "mjwarp" if torch.cuda.is_available() else "mujoco"


def make_vec_env(
    task_cfg: TaskConfig,
    sim_cfg: SimConfig,
    num_envs: int,
    device: str,
    seed: int,
    nan_guard: bool = True,
    nan_inject_step: int = -1,
    compile: bool = False,
    solver_early_exit: bool = False,
    play: bool = False,
    render: bool = False,
) -> VecEnv:
    """Build `num_envs` environments of `task_cfg.name` on `sim_cfg.name`, tensors on `device`.

    The mujoco backend runs on CPU threads and so needs device 'cpu'; mjwarp takes 'cuda[:i]' or
    'cpu' (warp's CPU device, slow, for tests). `compile`: torch.compile the step's tensor code
    (config.switches.tick_compile_enabled resolves sim.tick_compile). `solver_early_exit`: mjwarp's
    solver loop stops once all worlds converged, inside a captured tick (solver_early_exit_enabled).
    `play`: the env is for evaluation (`duorl play`); an mjlab task then uses its play configuration.
    `render`: an mjlab task builds its own offscreen renderer (`render_frame()`, for `duorl play --video`);
    duorl's own tasks are drawn from their backend's state and ignore it.
    An mjlab task is built whole by duorl.envs.mjlab (it steps MuJoCo Warp whatever sim_cfg says).
    """
    if task_sources.is_mjlab(task_cfg.name):
        return task_sources.mjlab_vec_env(task_cfg, num_envs, device, seed, play=play, render=render,
                                          staged_step=sim_cfg.mjlab_staged_step)
    _check("sim.name", sim_cfg.name, SIMS)
    task = make_task(task_cfg)
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
        backend = MujocoBackend(model, num_envs, task.substeps, nthread=sim_cfg.nthread)
    else:
        from duorl.envs.backends.mjwarp import MjWarpBackend

        # contact-rich tasks (the G1) size MuJoCo Warp's contact and constraint buffers
        backend = MjWarpBackend(model, num_envs, task.substeps, dev,
                                put_data_kwargs=getattr(task, "mjwarp_put_data_kwargs", None),
                                early_exit=solver_early_exit)
    return TaskVecEnv(task, backend, seed=seed, nan_guard=nan_guard, nan_inject_step=nan_inject_step, compile=compile)
