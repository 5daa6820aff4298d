"""What duorl reads of an mjlab task: which observation groups feed the actor and the critic, which action
terms it can drive, which logged terms become Task/ rows, and the EnvSpec built from them.

Refusals come first and need no simulation (the configuration alone): observation groups that hold camera
images, action terms of a type without a stated mapping. The sizes need one built env (mjlab's observation
terms know their width only when they run): `task_spec` builds the task with one env on Warp's CPU device
once per process and caches the spec, in the process and on disk (spec_cache.py: a later process, a run's
learner above all, reads it there without importing mjlab).
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from typing import Any

from duorl.config.errors import InputRefused
from duorl.envs.base import MAX_TASK_METRICS, EnvSpec
from duorl.envs.mjlab.family import NotTrainable


@dataclass(frozen=True)
class ObsGroups:
    """mjlab observation groups, concatenated in this order, that make duorl's actor and critic inputs."""

    actor: tuple[str, ...]
    critic: tuple[str, ...]


def obs_groups(task_id: str, cfg: Any) -> ObsGroups:
    """The groups mjlab's own runner feeds its actor and critic (the task's rl config `obs_groups`:
    `actor` and `critic` unless the task says otherwise); the critic reads the actor's where its groups
    are absent."""
    from duorl.envs.mjlab.loader import registry

    mapping = dict(getattr(registry().load_rl_cfg(task_id), "obs_groups", None) or {})
    present = set(cfg.observations)
    actor = tuple(mapping.get("actor", ("actor",)))
    missing = [g for g in actor if g not in present]
    if missing:
        raise NotTrainable(f"mjlab:{task_id}: its actor reads observation groups {missing} that the task does not "
                           f"define (it has {sorted(present)}); duorl cannot train it. Fix: pick another mjlab task",
                           "actor observation groups missing")
    critic = tuple(g for g in mapping.get("critic", ("critic",)) if g in present) or actor
    return ObsGroups(actor, critic)


def refuse_untrainable(task_id: str, cfg: Any, groups: ObsGroups) -> None:
    """InputRefused, from the configuration alone, for what duorl cannot train: observation terms that read
    a camera (images, not flat float vectors) and action terms without a stated [-1, 1] mapping."""
    from mjlab.sensor import CameraSensorCfg

    cameras = {s.name for s in (cfg.scene.sensors or ()) if isinstance(s, CameraSensorCfg)}
    for group in dict.fromkeys(groups.actor + groups.critic):
        for term_name, term in cfg.observations[group].terms.items():
            sensor = (getattr(term, "params", None) or {}).get("sensor_name")
            if sensor in cameras:
                raise NotTrainable(
                    f"mjlab:{task_id}: its observation group '{group}' holds camera images (term {term_name} reads the "
                    f"camera sensor {sensor}); duorl's actor and critic take flat float vectors. Fix: train a task "
                    "without camera observations (e.g. the state-based mjlab:Mjlab-Lift-Cube-Yam)", "camera observations")
    from duorl.envs.mjlab.actions import check_action_terms

    check_action_terms(task_id, cfg)


def flat_dim(task_id: str, env: Any, groups: tuple[str, ...]) -> int:
    """The width of the groups concatenated; InputRefused for a group that is not one flat vector."""
    dims = env.observation_manager.group_obs_dim
    concatenated = env.observation_manager.group_obs_concatenate
    total = 0
    for g in groups:
        dim = dims[g]
        if not concatenated[g] or not isinstance(dim, tuple) or len(dim) != 1:
            raise NotTrainable(f"mjlab:{task_id}: its observation group '{g}' is not one flat float vector (shape {dim}); "
                               "duorl's actor and critic take flat float vectors. Fix: pick another mjlab task",
                               "observations not flat vectors")
        total += int(dim[0])
    return total


_cache: dict[tuple[str, tuple[Any, ...]], tuple[EnvSpec, tuple[str, ...]]] = {}


def task_spec(task_id: str, task_cfg: Any, note: bool = True, cached: bool = True) -> EnvSpec:
    """See duorl.envs.mjlab.task_spec; `note`: name the logged terms beyond the Task/ rows on stderr (a
    run's note; a listing leaves it out); `cached`: read the spec cache on disk (spec_cache.py) before
    building (a refreshed listing builds anyway). A spec built is written to that cache."""
    from duorl.envs.mjlab.spec_cache import cached_spec, store_spec

    key = (task_id, dataclasses.astuple(task_cfg))  # every task key may shape the env (a family's own too)
    if key not in _cache or not cached:
        on_disk = cached_spec(task_id, task_cfg) if cached else None
        if on_disk is not None:
            _cache[key] = on_disk[0], on_disk[1]
        else:
            _cache[key] = _build_spec(task_id, task_cfg)
            store_spec(task_id, task_cfg, *_cache[key])
        dropped = _cache[key][1]
        if dropped and note:
            print(f"duorl: note: mjlab:{task_id} logs more terms than duorl's {MAX_TASK_METRICS} Task/ rows; "
                  f"not logged: {', '.join(dropped)} (docs/tasks.md, mjlab tasks)", file=sys.stderr, flush=True)
    return _cache[key][0]


def _build_spec(task_id: str, task_cfg: Any) -> tuple[EnvSpec, tuple[str, ...]]:
    from duorl.envs.mjlab.loader import build_env, env_cfg, registry

    reg = registry()
    if task_id not in reg.list_tasks():
        raise InputRefused(f"mjlab:{task_id} is not in mjlab's registry. Fix: pick an id that `duorl tasks` lists")
    cfg = env_cfg(task_id, task_cfg, 1, 0)
    groups = obs_groups(task_id, cfg)
    refuse_untrainable(task_id, cfg, groups)
    env = build_env(cfg, "cpu")
    try:
        spec, _, dropped = describe(task_id, env, groups)
    finally:
        env.close()
    return spec, dropped


def describe(task_id: str, env: Any, groups: ObsGroups) -> tuple[EnvSpec, list[Any], tuple[str, ...]]:
    """(the EnvSpec of a built env, its Task/ rows, the names of the logged terms beyond the rows)."""
    from duorl.envs.mjlab.metrics import metric_rows

    rows, dropped = metric_rows(env)
    spec = EnvSpec(
        task=f"mjlab:{task_id}",
        actor_obs_dim=flat_dim(task_id, env, groups.actor),
        critic_obs_dim=flat_dim(task_id, env, groups.critic),
        action_dim=int(env.action_manager.total_action_dim),
        max_episode_steps=int(env.max_episode_length),
        control_dt=float(env.step_dt),
        metric_names=tuple(r.name for r in rows),
        mirror=None,
    )
    return spec, rows, dropped
