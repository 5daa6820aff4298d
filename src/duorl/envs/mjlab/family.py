"""The mjlab task family: what duorl knows of every `mjlab:<id>` task without importing mjlab.

Its name prefix, the extra that installs it, the facts its source states (envs/task_sources.py): it steps
MuJoCo Warp only, its tick cannot be one CUDA graph, its step is not duorl's to compile; and its `task.*`
keys. A family of mjlab tasks declares keys of its own in a dataclass extending `MjlabConfig` and claims
its ids in `FAMILIES`; a key declared with `mjlab_key(default, help, path)` reaches that attribute path of
mjlab's env configuration when set (`apply_keys`, called by loader.env_cfg), e.g. a tracking family's
`task.motion_file` -> `commands.motion.motion_file`. docs/tasks.md (`## mjlab tasks`) is the user's side.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import types
from dataclasses import dataclass
from typing import Any, Callable

from duorl.config.errors import InputRefused
from duorl.config.schema import TaskConfig, setting
from duorl.config.tasks import TaskFacts

PREFIX = "mjlab:"
INSTALL = "pip install 'duorl[mjlab]'"
SIM = "mjwarp"
# what the one backend it steps is, in words (config.validate: "the task X always steps <this>")
SIM_REASON = "MuJoCo Warp, on a GPU or warp's CPU device with training.devices=[cpu] (duorl.envs.mjlab builds it whole)"
# why an mjlab task's collector tick runs eagerly (MjlabVecEnv.tick_capturable is False; the manifest says it)
TICK_EAGER_REASON = "mjlab's step reads device values on the host (done envs, termination counts)"
TICK_COMPILE_REASON = "an mjlab task's step is mjlab's"


def check_installed() -> None:
    """InputRefused naming the install command when mjlab is not importable (nothing is imported)."""
    if importlib.util.find_spec("mjlab") is None:
        raise InputRefused(f"mjlab tasks need mjlab, which is not installed here. Fix: {INSTALL}")


def mjlab_key(default: Any, help: str, path: str, **facts: Any) -> Any:
    """A key of an mjlab family (schema.setting's arguments) whose value, when not None, is written to
    `path` of mjlab's env configuration (dotted attributes, e.g. "commands.motion.motion_file")."""
    f = setting(default, help, **facts)
    f.metadata = types.MappingProxyType({**f.metadata, "mjlab": path})
    return f


@dataclass
class MjlabConfig(TaskConfig):
    """Every mjlab task reads the keys every task reads (task.max_episode_steps sets mjlab's episode
    length); a family of mjlab tasks extends this with its own."""


@dataclass(frozen=True)
class MjlabFamily:
    """mjlab tasks with keys of their own: `label` names them in listings (`mjlab:<label>`), `member` says
    whether an mjlab id belongs to them, `keys` is their dataclass."""

    label: str
    member: Callable[[str], bool]
    keys: type[MjlabConfig]


# first match wins; every other id gets MjlabConfig
FAMILIES: tuple[MjlabFamily, ...] = ()


def keys_of(task_id: str) -> type[MjlabConfig]:
    """The dataclass of keys of mjlab's `task_id`."""
    return next((f.keys for f in FAMILIES if f.member(task_id)), MjlabConfig)


def facts(name: str, task_id: str, keys: type[MjlabConfig] | None = None) -> TaskFacts:
    """What an mjlab task states of itself (config/tasks.TaskFacts): its keys (`keys_of(task_id)` unless
    given), MuJoCo Warp only, an eager tick, a step that is not duorl's to compile; no YAML."""
    return TaskFacts(name, keys or keys_of(task_id), sim=SIM, sim_reason=SIM_REASON,
                     tick_eager_reason=TICK_EAGER_REASON, tick_compile_reason=TICK_COMPILE_REASON,
                     steps_in_stages=True)


def apply_keys(task_cfg: Any, env_cfg: Any) -> None:
    """Write every family key that names an mjlab path (mjlab_key) and is set (not None) into mjlab's env
    configuration `env_cfg`, in place."""
    if not dataclasses.is_dataclass(task_cfg):
        return
    for f in dataclasses.fields(task_cfg):
        path, value = f.metadata.get("mjlab"), getattr(task_cfg, f.name)
        if path is None or value is None:
            continue
        *parents, leaf = path.split(".")
        node = env_cfg
        for part in parents:
            node = node[part] if isinstance(node, dict) else getattr(node, part)
        if isinstance(node, dict):
            node[leaf] = value
        else:
            setattr(node, leaf, value)
