"""Where a task name comes from, and the checks a task passes before a run builds anything.

`task.name` (`--task`) names a task of exactly one source:
  builtin      pendulum_swingup, g1_walk_flat, g1_motion_tracking (their YAML defaults in config/defaults/task/)
  entry point  a name registered in the `duorl.tasks` entry point group by an installed distribution
  import path  `package.module:factory`
  mjlab        `mjlab:<task id>`, delegated to duorl.envs.mjlab (an optional extra: duorl[mjlab])
A builtin, entry point or import-path factory is called with the run's TaskConfig and returns a Task
(envs/tasks/base.py), which steps on duorl's backends through TaskVecEnv. An mjlab task is a whole
VecEnv that duorl.envs.mjlab builds.

Only a name travels to the spawned collector (TaskConfig pickles), which resolves it again here: an
entry point or import path re-imports there. Importing this module is cheap (no torch, no simulator):
config validation imports it to check a name that is not built in.
"""

from __future__ import annotations

import difflib
import importlib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from duorl.config.errors import ConfigError, InputRefused

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

    from duorl.config.schema import TaskConfig
    from duorl.envs.base import EnvSpec
    from duorl.envs.tasks.base import Task

ENTRY_POINT_GROUP = "duorl.tasks"
MJLAB_PREFIX = "mjlab:"
MJLAB_INSTALL = "pip install 'duorl[mjlab]'"
# why an mjlab task's collector tick runs eagerly (MjlabVecEnv.tick_capturable is False; the manifest says it)
MJLAB_TICK_EAGER_REASON = "mjlab's step reads device values on the host (done envs, termination counts)"
KEY = "task.name"
# name -> factory, each importable as an import path (one mechanism loads every Task source)
BUILTIN: dict[str, str] = {
    "pendulum_swingup": "duorl.envs.tasks.builtin:pendulum_swingup",
    "g1_walk_flat": "duorl.envs.tasks.builtin:g1_walk_flat",
    "g1_motion_tracking": "duorl.envs.tasks.builtin:g1_motion_tracking",
}
# what a Task must have (envs/tasks/base.py), checked on what a factory returns
TASK_ATTRIBUTES = ("spec", "substeps", "mj_model", "bind", "reset", "apply_action", "observe", "reward", "terminated")
_IMPORT_PATH = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")
# task.name's allowed values as `duorl config --keys` and docs/configuration.md state them
ALLOWED = (f"{', '.join(sorted(BUILTIN))}; an entry point of {ENTRY_POINT_GROUP}; package.module:factory; "
           f"{MJLAB_PREFIX}ID (`duorl tasks` lists them)")


@dataclass(frozen=True)
class TaskSource:
    """One task name's source. `target`: the factory's import path (`module:attr`), or the mjlab task id."""

    name: str
    kind: str  # "builtin", "entry point", "import path" or "mjlab"
    target: str
    dist: str | None = None  # the distribution that registers an entry point

    @property
    def label(self) -> str:
        """How `duorl tasks` names the source."""
        return f"entry point {self.dist}" if self.kind == "entry point" else self.kind


def is_mjlab(name: str) -> bool:
    return name.startswith(MJLAB_PREFIX)


def tick_eager_reason(name: str) -> str | None:
    """Why the task's env step cannot sit in the collector's CUDA graph (None: it can)."""
    return MJLAB_TICK_EAGER_REASON if is_mjlab(name) else None


def _refuse(name: str, problem: str, allowed: str, fix: str) -> ConfigError:
    return ConfigError(KEY, name, problem, allowed, fix)


def _entry_points() -> dict[str, list[EntryPoint]]:
    """The `duorl.tasks` entry points by name (a name may be registered twice: refused when asked for)."""
    from importlib.metadata import entry_points  # 40 ms: only once a name is not builtin

    out: dict[str, list[EntryPoint]] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        out.setdefault(ep.name, []).append(ep)
    return out


def _dist_name(ep: EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    return dist.name if dist is not None else "?"


def task_names() -> list[str]:
    """The builtin and entry-point task names (import paths and mjlab ids are not listed here)."""
    return sorted(set(BUILTIN) | set(_entry_points()))


def source_of(name: str) -> TaskSource:
    """The one source of `name`, without importing the task. ConfigError for an unknown or
    ambiguous name."""
    if is_mjlab(name):
        return TaskSource(name, "mjlab", name[len(MJLAB_PREFIX):])
    if ":" in name:
        if not _IMPORT_PATH.fullmatch(name):
            raise _refuse(name, "not an import path", "package.module:factory (dotted names, one colon)",
                          "write it as --task package.module:factory")
        return TaskSource(name, "import path", name)
    eps = _entry_points().get(name, [])
    if name in BUILTIN and eps:
        raise _refuse(name, f"is both a builtin task and an entry point of {_dist_name(eps[0])}", "one source per name",
                      f"rename the entry point, or train it by import path: --task {eps[0].value}")
    if len(eps) > 1:
        where = ", ".join(f"{_dist_name(ep)} ({ep.value})" for ep in eps)
        raise _refuse(name, f"is registered by several `{ENTRY_POINT_GROUP}` entry points: {where}",
                      "one source per name", f"train one of them by import path, e.g. --task {eps[0].value}")
    if eps:
        return TaskSource(name, "entry point", eps[0].value, _dist_name(eps[0]))
    if name in BUILTIN:
        return TaskSource(name, "builtin", BUILTIN[name])
    close = difflib.get_close_matches(name, task_names(), n=3, cutoff=0.5)
    fix = f"did you mean {' or '.join(close)}? " if close else "pick one with --task; "
    raise _refuse(name, "unknown task", ", ".join(task_names()),
                  f"{fix}`duorl tasks` lists every task, and a task of your own runs as --task package.module:factory")


def load_factory(source: TaskSource) -> Callable[[TaskConfig], Task]:
    """Import the factory of a builtin, entry-point or import-path task. ConfigError naming the task and
    the error when it does not import or is not callable."""
    module_name, _, attr = source.target.partition(":")
    what = f"the {source.kind} {source.name}" + (f" ({source.target})" if source.target != source.name else "")
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as e:  # noqa: BLE001 - any error of the user's module is a refusal naming it
        hint = " (is its package installed, or on PYTHONPATH?)" if isinstance(e, ModuleNotFoundError) else ""
        raise _refuse(source.name, f"{what} fails to import: {type(e).__name__}: {_first_line(e)}{hint}",
                      "an importable module", f"fix or install {module_name}") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            names = [n for n in dir(obj) if not n.startswith("_")]
            close = difflib.get_close_matches(part, names, n=3, cutoff=0.5)
            allowed = ", ".join(f"{module_name}:{n}" for n in close) if close else f"a factory defined in {module_name}"
            raise _refuse(source.name, f"{what}: {module_name} has no attribute {attr}", allowed,
                          "name a function that returns a duorl Task")
        obj = getattr(obj, part)
    if not callable(obj):
        raise _refuse(source.name, f"{what}: {source.target} is a {type(obj).__name__}, not callable",
                      "a factory: TaskConfig -> Task", "name a function that returns a duorl Task")
    return obj


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else "(no message)"


# ------------------------------------------------------------------------------------------ mjlab
def mjlab_module() -> Any:
    """duorl.envs.mjlab, once mjlab itself is installed; ConfigError naming the install command."""
    try:
        module = importlib.import_module("duorl.envs.mjlab")
    except ModuleNotFoundError as e:
        if e.name not in ("duorl.envs.mjlab", "mjlab"):
            raise
        raise ConfigError(KEY, "mjlab:...", "mjlab tasks need the mjlab extra, which is not installed",
                          "the mjlab extra", MJLAB_INSTALL) from None
    module.check_installed()
    return module


def _mjlab_task(name: str) -> tuple[Any, str]:
    """(duorl.envs.mjlab, the task id) for a known mjlab id; ConfigError with the closest ids otherwise."""
    try:
        module = mjlab_module()
    except ConfigError as e:
        raise ConfigError(KEY, name, e.problem, e.allowed, e.fix) from None
    except InputRefused as e:  # check_installed's own line, without its fix (named once, here)
        raise ConfigError(KEY, name, str(e).split(" Fix: ")[0].rstrip("."), "the mjlab extra", MJLAB_INSTALL) from None
    task_id = name[len(MJLAB_PREFIX):]
    ids = list(module.task_ids())
    if task_id not in ids:
        close = difflib.get_close_matches(task_id, ids, n=3, cutoff=0.5)
        allowed = ", ".join(MJLAB_PREFIX + i for i in close) if close else f"{len(ids)} ids (`duorl tasks`)"
        fix = f"did you mean {MJLAB_PREFIX}{close[0]}?" if close else "pick an id that `duorl tasks` lists"
        raise ConfigError(KEY, name, "unknown mjlab task id", f"closest: {allowed}" if close else allowed, fix)
    return module, task_id


def mjlab_vec_env(task_cfg: TaskConfig, num_envs: int, device: str, seed: int, play: bool = False,
                  render: bool = False, staged_step: bool | None = None) -> Any:
    module, task_id = _mjlab_task(task_cfg.name)
    return module.make_vec_env(task_id, task_cfg, num_envs, device, seed, play=play, render=render,
                               staged_step=staged_step)


# ------------------------------------------------------------------------------------ tasks, specs
def make_task(task_cfg: TaskConfig) -> Task:
    """A fresh, unbound Task for `task_cfg` from its source. ConfigError when the source does not
    import, the factory fails or returns no Task, or the task's spaces cannot be trained."""
    source = source_of(task_cfg.name)
    if source.kind == "mjlab":
        raise ConfigError(KEY, task_cfg.name, "an mjlab task is a whole VecEnv, not a Task", "a Task source",
                          "use envs.registry.make_vec_env / env_spec for it")
    factory = load_factory(source)
    if source.kind == "builtin":  # duorl's own: their tests hold them to the contract
        return factory(task_cfg)
    try:
        task = factory(task_cfg)
    except InputRefused:
        raise
    except Exception as e:  # noqa: BLE001 - the user's factory: name it and its error
        raise _refuse(task_cfg.name, f"the factory {source.target} raised {type(e).__name__}: {_first_line(e)}",
                      "a factory that returns a Task", f"fix {source.target}") from None
    missing = [a for a in TASK_ATTRIBUTES if not hasattr(task, a)]
    if missing:
        raise _refuse(task_cfg.name, f"the factory {source.target} returned a {type(task).__name__}, which is no "
                      f"duorl Task (it lacks {', '.join(missing)})", "a Task (envs/tasks/base.py)",
                      f"return a Task from {source.target} (docs/tasks.md)")
    check_spec(task.spec, task_cfg.name)
    return task


def task_spec(task_cfg: TaskConfig) -> EnvSpec:
    """Shapes and timing of the configured task, without building a simulation."""
    if is_mjlab(task_cfg.name):
        module, task_id = _mjlab_task(task_cfg.name)
        spec = module.task_spec(task_id, task_cfg)
        check_spec(spec, task_cfg.name)
        return spec
    return make_task(task_cfg).spec


def check_task(task_cfg: TaskConfig) -> None:
    """Config validation's check of a task name: builtin names pass at once (nothing imported); an mjlab
    task needs mjlab and a known id (its spec, which builds the task once, is checked when a run asks for
    it, still before anything of the run is built); others are imported and their spec checked.
    ConfigError otherwise."""
    if task_cfg.name in BUILTIN:  # an entry point of the same name is refused when the task is made
        return
    if is_mjlab(task_cfg.name):
        _mjlab_task(task_cfg.name)
        return
    task_spec(task_cfg)


def check_spec(spec: Any, name: str) -> None:
    """The spaces duorl trains: flat float vectors, actor and critic observations and actions of at
    least one entry each (the learner's networks and the replay ring are sized by them), actions in
    [-1, 1] (the policy's tanh), episodes of at least one step and a positive control step."""
    from duorl.envs.base import EnvSpec

    if not isinstance(spec, EnvSpec):
        raise _refuse(name, f"its spec is a {type(spec).__name__}, not an EnvSpec", "envs.base.EnvSpec",
                      "give the task an EnvSpec (docs/tasks.md)")
    sizes = {"actor_obs_dim": spec.actor_obs_dim, "critic_obs_dim": spec.critic_obs_dim,
             "action_dim": spec.action_dim, "max_episode_steps": spec.max_episode_steps}
    bad = [f"{k}={v!r}" for k, v in sizes.items() if isinstance(v, bool) or not isinstance(v, int) or v < 1]
    if bad:
        raise _refuse(name, f"duorl cannot train its spaces: {', '.join(bad)} (every size and the episode length "
                      "must be an integer >= 1)", "flat float observations and actions of size >= 1",
                      "fix the task's EnvSpec (docs/tasks.md)")
    dt = spec.control_dt
    if isinstance(dt, bool) or not isinstance(dt, (int, float)) or not dt > 0:
        raise _refuse(name, f"its control_dt={dt!r} is not a positive number of seconds", "control_dt > 0",
                      "fix the task's EnvSpec (docs/tasks.md)")


def check_symmetry(spec: Any, use_symmetry: bool) -> None:
    """algo.use_symmetry=true needs a task that describes its left-right mirror (EnvSpec.mirror)."""
    if use_symmetry and getattr(spec, "mirror", None) is None:
        raise ConfigError("algo.use_symmetry", True, f"needs a task that describes its left-right mirror, and "
                          f"{spec.task} does not", "true (tasks with a mirror, e.g. g1_walk_flat), false",
                          "set algo.use_symmetry=false")


def probe_task(task_cfg: TaskConfig) -> None:
    """Step a non-builtin Task once in two MuJoCo C worlds and check what it returns against the
    Task contract (observation keys, shapes, float32 dtype; reward, terminated and ctrl shapes), so a
    task that breaks it is refused in one line before a run starts, not inside the collector.
    Builtin and mjlab tasks are skipped (their own tests hold them to the contract)."""
    import torch

    from duorl.envs.backends.mujoco_cpu import MujocoBackend
    from duorl.envs.vec_env import TaskVecEnv

    if task_cfg.name in BUILTIN or is_mjlab(task_cfg.name):
        return
    task = make_task(task_cfg)
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
        raise _refuse(task_cfg.name, f"stepping the task once raised {type(e).__name__}: {_first_line(e)}",
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
        raise _refuse(task_cfg.name, "duorl cannot train it: " + "; ".join(dict.fromkeys(problems)),
                      "the Task contract (docs/tasks.md)", "fix the task")


# -------------------------------------------------------------------------------------- listing
@dataclass(frozen=True)
class TaskEntry:
    """One row of `duorl tasks`: sizes, or the reason the task cannot be loaded."""

    name: str
    source: str
    actor_obs_dim: int | None = None
    critic_obs_dim: int | None = None
    action_dim: int | None = None
    mirror: bool = False
    error: str | None = None


def _entry(name: str, source: str, spec_of: Callable[[], Any]) -> TaskEntry:
    try:
        spec = spec_of()
    except Exception as e:  # noqa: BLE001 - a listing shows a broken task, it does not stop at it
        return TaskEntry(name, source, error=_first_line(e))
    return TaskEntry(name, source, spec.actor_obs_dim, spec.critic_obs_dim, spec.action_dim, spec.mirror is not None)


def list_tasks() -> tuple[list[TaskEntry], list[str]]:
    """Every task duorl can train here (builtin, entry points, mjlab's when installed) and notes
    (one line each, e.g. that mjlab is not installed). Specs only: no simulation is built."""
    from duorl.config.schema import TaskConfig

    entries: list[TaskEntry] = []
    names = task_names()
    for name in names:
        try:
            label = source_of(name).label
        except ConfigError as e:
            entries.append(TaskEntry(name, "?", error=e.problem))
            continue
        entries.append(_entry(name, label, lambda: task_spec(TaskConfig(name=name))))
    notes: list[str] = []
    try:
        module = mjlab_module()
    except InputRefused:
        notes.append(f"mjlab: not installed ({MJLAB_INSTALL})")
    else:
        for task_id in module.task_ids():
            name = MJLAB_PREFIX + task_id
            entries.append(_entry(name, "mjlab", lambda: module.task_spec(task_id, TaskConfig(name=name))))
    return entries, notes
