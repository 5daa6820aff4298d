"""mjlab's task registry as duorl tasks: `--task mjlab:<task id>` (the optional extra duorl[mjlab]).

Importing this package never imports mjlab (itself slow: it pulls in its viewer stack); every function
below imports it on first use. An mjlab task is a whole VecEnv (`MjlabVecEnv`, envs/base.py's
contract) around mjlab's `ManagerBasedRlEnv`, built from `load_env_cfg(id)` with duorl's env count,
seed and device; it always steps MuJoCo Warp (CUDA, or Warp's CPU device). What duorl knows of the family
without mjlab (its prefix, install command, facts and keys) is `family.py`. docs/tasks.md
(`## mjlab tasks`) states the mapping of observations, actions, time-outs and logged terms.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from duorl.envs.mjlab.family import INSTALL, PREFIX, check_installed

if TYPE_CHECKING:
    from duorl.config.schema import TaskConfig
    from duorl.envs.base import EnvSpec
    from duorl.envs.mjlab.vec_env import MjlabVecEnv


__all__ = ["PREFIX", "INSTALL", "check_installed", "task_ids", "check_inputs", "task_rows", "task_spec",
           "make_vec_env", "resume_restarts"]


def task_ids() -> list[str]:
    """Every task id in mjlab's registry: from the cache of them (envs/mjlab/spec_cache.py) when valid,
    else imports mjlab and its tasks (several seconds) and writes that cache."""
    from duorl.envs.mjlab.spec_cache import cached_ids

    ids = cached_ids()
    if ids is not None:
        return ids
    from duorl.envs.mjlab.loader import registry
    from duorl.envs.mjlab.spec_cache import store_ids

    ids = list(registry().list_tasks())
    store_ids(ids)
    return ids


def task_rows(refresh: bool = False) -> list[Any]:
    """`duorl tasks`' rows of mjlab's registry (envs/mjlab/listing.MjlabRow: name, source, status, sizes,
    error), from the cache of this mjlab version unless `refresh` (or it is stale): then mjlab is imported
    and every task built once."""
    from duorl.envs.mjlab.listing import mjlab_rows

    return mjlab_rows(refresh)[0]


def check_inputs(task_id: str, task_cfg: TaskConfig) -> None:
    """Config validation's check of `task_id`'s family keys against mjlab's configuration of the task (a
    tracking task's clip against its robot): ConfigError, nothing built; a task of no family: nothing."""
    from duorl.envs.mjlab.family import check_inputs as check_family, family_of

    if family_of(task_id) is None:
        return
    from duorl.envs.mjlab.loader import registry

    check_family(task_id, task_cfg, registry().load_env_cfg(task_id))


def task_spec(task_id: str, task_cfg: TaskConfig) -> EnvSpec:
    """Sizes, timing and logged terms of mjlab's `task_id`. Refuses (InputRefused) a task duorl cannot
    train (camera observations, an action term of an unsupported type) before building anything; else
    builds the task once with one env on Warp's CPU device and caches the spec for this process and on
    disk; a valid spec on disk (envs/mjlab/spec_cache.py) is read instead, without importing mjlab."""
    from duorl.envs.mjlab.spec import task_spec as _task_spec

    return _task_spec(task_id, task_cfg)


def make_vec_env(task_id: str, task_cfg: TaskConfig, num_envs: int, device: str, seed: int,
                 play: bool = False, render: bool = False, staged_step: bool | None = None,
                 reset_graphs: bool | None = None) -> MjlabVecEnv:
    """`num_envs` envs of mjlab's `task_id` on `device` ('cpu': Warp's CPU device, or 'cuda[:i]');
    `play`: mjlab's play configuration (`load_env_cfg(id, play=True)`), for `duorl play`; `render`:
    with mjlab's offscreen renderer (its viewer settings; needs OpenGL), for `duorl play --video`;
    `staged_step`: sim.mjlab_staged_step as configured (null = on for CUDA envs; envs/mjlab/staged_step.py);
    `reset_graphs`: sim.mjlab_reset_graphs as configured (null = staged_step.RESET_GRAPHS_BY_MODE)."""
    from duorl.envs.mjlab.vec_env import build_vec_env

    return build_vec_env(task_id, task_cfg, num_envs, device, seed, play, render, staged_step, reset_graphs)


def resume_restarts(task_id: str, task_cfg: TaskConfig) -> list[str]:
    """What a resumed run of `task_id` starts over (its curriculum, adaptive sampling), one line each: mjlab
    keeps it in the env, which duorl does not checkpoint (envs/mjlab/resume.py)."""
    from duorl.envs.mjlab.resume import restarts

    return restarts(task_id, task_cfg)
