"""The mjlab task family: what duorl knows of every `mjlab:<id>` task without importing mjlab.

Its name prefix, the extra that installs it, the facts its source states (envs/task_sources.py): it steps
MuJoCo Warp only, its tick cannot be one CUDA graph, its step is not duorl's to compile; and its `task.*`
keys. A family of mjlab tasks declares keys of its own in a dataclass extending `MjlabConfig` and claims
its ids in `FAMILIES`; a key declared with `mjlab_key(default, help, path)` reaches that attribute path of
mjlab's env configuration when set (`apply_keys`, called by loader.env_cfg), e.g. a tracking family's
`task.motion_file` -> `commands.motion.motion_file`. A family's `required` keys must be set (refused at once,
before mjlab is imported), and its `check` runs with config validation: mjlab's tracking tasks check their
clip (envs/mjlab/motion_clip.py). docs/tasks.md (`## mjlab tasks`) is the user's side.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import types
from dataclasses import dataclass
from typing import Any, Callable, Optional

from duorl.config.errors import ConfigError, InputRefused
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


class NotTrainable(InputRefused):
    """A task duorl cannot train, known from its configuration; `status` says why in a few words (the
    listing's status column: `camera observations`, `action term <type>`)."""

    def __init__(self, message: str, status: str) -> None:
        super().__init__(message)
        self.status = status


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


@dataclass
class MjlabTrackingConfig(MjlabConfig):
    """mjlab's motion-tracking tasks: the reference clip their motion command plays."""

    motion_file: Optional[str] = mjlab_key(
        None, "mjlab tracking: the reference clip, an .npz in mjlab's motion format (`duorl motion import SRC "
              "CLIP.npz --out-fps 50`; docs/tasks.md); required", "commands.motion.motion_file",
        free_form=True, allowed="a path to an .npz clip")


@dataclass(frozen=True)
class MjlabFamily:
    """mjlab tasks with keys of their own: `label` names them in listings (`mjlab:<label>`), `member` says
    whether an mjlab id belongs to them, `keys` is their dataclass; `required`: keys that must be set (the
    listing's status says `needs task.<key>`); `check`: (task_id, task_cfg, env_cfg) -> None, raising
    ConfigError, run with config validation twice: with env_cfg None before mjlab is imported, then with
    mjlab's env configuration of the task (envs/mjlab/inputs.py), before any env is built."""

    label: str
    member: Callable[[str], bool]
    keys: type[MjlabConfig]
    required: tuple[str, ...] = ()
    check: Optional[Callable[[str, Any, Any], None]] = None


def _check_tracking(task_id: str, task_cfg: Any, env_cfg: Any) -> None:
    from duorl.envs.mjlab.motion_clip import check_file, check_task_clip

    if env_cfg is None:
        check_file(task_cfg.motion_file, PREFIX + task_id)
    else:
        check_task_clip(PREFIX + task_id, task_cfg, env_cfg)


# first match wins; every other id gets MjlabConfig
FAMILIES: tuple[MjlabFamily, ...] = (
    MjlabFamily("Mjlab-Tracking-*", lambda task_id: task_id.startswith("Mjlab-Tracking-"), MjlabTrackingConfig,
                required=("motion_file",), check=_check_tracking),
)


def family_of(task_id: str) -> Optional[MjlabFamily]:
    """The family `task_id` belongs to (None: only the keys every mjlab task reads)."""
    return next((f for f in FAMILIES if f.member(task_id)), None)


def keys_of(task_id: str) -> type[MjlabConfig]:
    """The dataclass of keys of mjlab's `task_id`."""
    family = family_of(task_id)
    return family.keys if family is not None else MjlabConfig


def needs(task_id: str, task_cfg: Any = None) -> list[str]:
    """The required keys of `task_id`'s family that `task_cfg` (None: the defaults) leaves unset."""
    family = family_of(task_id)
    if family is None:
        return []
    return [k for k in family.required if task_cfg is None or getattr(task_cfg, k, None) in (None, "")]


def check_inputs(task_id: str, task_cfg: Any, env_cfg: Any = None) -> None:
    """Config validation's check of a family's keys: a required key unset (env_cfg None: before mjlab is
    imported), then the family's own check. ConfigError naming the key and the fix."""
    family = family_of(task_id)
    if family is None:
        return
    missing = needs(task_id, task_cfg)
    if missing and env_cfg is None:
        from duorl.envs.mjlab.motion_clip import make_clip

        key = missing[0]
        raise ConfigError(f"task.{key}", getattr(task_cfg, key, None), f"{PREFIX}{task_id} needs task.{key}=CLIP.npz "
                          "(the reference motion its motion command plays; mjlab ships none)",
                          "a path to an .npz clip in mjlab's motion format", make_clip(PREFIX + task_id))
    if not missing and family.check is not None:
        family.check(task_id, task_cfg, env_cfg)


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
