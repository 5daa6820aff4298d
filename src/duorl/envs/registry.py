"""From a task's keys (a TaskConfig) to what a run builds: the task's source resolved again, in whichever
process asks (envs/task_sources.py), then asked for the VecEnv or the spec.

`make_vec_env` is a module-level function of plain dataclasses and builtins so that
`functools.partial(make_vec_env, ...)` pickles into the spawned collector process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from duorl.config.schema import SimConfig, TaskConfig
from duorl.envs.task_sources import source_of

if TYPE_CHECKING:
    from duorl.envs.base import EnvSpec, VecEnv
    from duorl.envs.tasks.base import Task


def env_spec(task_cfg: TaskConfig) -> EnvSpec:
    """Shapes and timing of the configured task, without building any simulation."""
    return source_of(task_cfg.name).spec(task_cfg)


def make_task(task_cfg: TaskConfig) -> Task | None:
    """A fresh, unbound Task of the configured task (None: its source builds a whole VecEnv, mjlab's)."""
    return source_of(task_cfg.name).make_task(task_cfg)


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
    return source_of(task_cfg.name).make_vec_env(task_cfg, sim_cfg, num_envs, device, seed, nan_guard,
                                                  nan_inject_step, compile, solver_early_exit, play, render)
