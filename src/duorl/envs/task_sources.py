"""The task layer's front door: a task name resolves to one source object that carries everything about
the task.

`task.name` (`--task`) names a task of exactly one source:
  builtin      duorl's own (envs/tasks/builtin.py names them, with their keys and YAML defaults)
  entry point  a name registered in the `duorl.tasks` entry point group by an installed distribution
  import path  `package.module:factory`
  mjlab        `mjlab:<task id>`, delegated to duorl.envs.mjlab (an optional extra: duorl[mjlab])
A builtin, entry point or import-path factory is called with the run's task keys and returns a Task
(envs/tasks/base.py), which steps on duorl's backends through TaskVecEnv (envs/task_env.py). A factory
declares its task's own keys in its `config_class` attribute (a dataclass extending
config.schema.TaskConfig; docs/tasks.md). An mjlab task is a whole VecEnv that duorl.envs.mjlab builds.

A source (`TaskSource`) states the task's facts: its keys, its shipped defaults, the backend it needs,
whether its tick can be one CUDA graph; `facts()` hands the configuration what it needs of them
(config/tasks.TaskFacts, through the entry layer: config never imports envs). It builds the task
(`spec`, `make_task`, `make_vec_env`) and runs its checks (`check`: with config validation; `first_check`:
before anything of a run exists; `preflight`: before any process is spawned).

Only a name travels to the spawned collector (its keys' dataclass pickles), which resolves it again here:
an entry point or import path re-imports there. Importing this module is cheap (no torch, no simulator).
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from duorl.config.errors import ConfigError, InputRefused
from duorl.config.schema import TaskConfig, setting_of
from duorl.config.tasks import TaskCatalog, TaskFacts
from duorl.envs import mjlab as mjlab_adapter  # light: mjlab itself is imported on first use
from duorl.envs.mjlab import family as mjlab_family
from duorl.envs.task_import import ExitAtImport, call_waiting, import_task_module
from duorl.envs.tasks.builtin import BUILTIN, DEFAULT_TASK, defaults_of

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

    from duorl.envs.base import EnvSpec, VecEnv
    from duorl.envs.tasks.base import Task

ENTRY_POINT_GROUP = "duorl.tasks"
KEY = "task.name"
# the attribute of a package's factory that declares its task's own keys (a TaskConfig dataclass)
CONFIG_CLASS = "config_class"
# what a Task must have (envs/tasks/base.py), checked on what a factory returns
TASK_ATTRIBUTES = ("spec", "substeps", "mj_model", "bind", "reset", "apply_action", "observe", "reward", "terminated")
_IMPORT_PATH = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")
_PACKAGE = Path(__file__).resolve().parents[1]  # src/duorl: listings name files relative to it
# task.name's allowed values as `duorl config --keys` and docs/configuration.md state them
ALLOWED = (f"{', '.join(sorted(BUILTIN))}; an entry point of {ENTRY_POINT_GROUP}; package.module:factory; "
           f"{mjlab_family.PREFIX}ID (`duorl tasks` lists them)")
# how `duorl train --help` names the sources beyond the listed names
OTHER_SOURCES = f"package.module:factory, or {mjlab_family.PREFIX}ID"


# the Task the checks built, by (source, factory, configuration): FactorySource.checked_task
_CHECKED: dict[tuple[Any, ...], Any] = {}


def _refuse(name: str, problem: str, allowed: str, fix: str) -> ConfigError:
    return ConfigError(KEY, name, problem, allowed, fix)


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else "(no message)"


# --------------------------------------------------------------------------------------- sources
@dataclass(frozen=True)
class TaskSource:
    """One task and its facts. `kind`: "builtin", "entry point", "import path" or "mjlab". `stated`: what
    the task states of itself (config/tasks.TaskFacts: its name, dataclass of keys, shipped YAML, the one
    backend it steps, why its collector tick cannot be one CUDA graph, the VecEnv it builds saying the same
    in VecEnv.tick_capturable; why sim.tick_compile cannot compile its step); `facts()` adds its check."""

    kind: str
    stated: TaskFacts

    @property
    def name(self) -> str:
        return self.stated.name

    @property
    def keys(self) -> type[TaskConfig]:
        return self.stated.keys

    @property
    def defaults(self) -> Path | None:
        return self.stated.defaults

    @property
    def tick_capturable(self) -> bool:
        return self.stated.tick_capturable

    @property
    def tick_eager_reason(self) -> str | None:
        return self.stated.tick_eager_reason

    @property
    def label(self) -> str:
        """How `duorl tasks` names the source."""
        return self.kind

    def facts(self) -> TaskFacts:
        """What the configuration needs of this task (config/tasks.py), its check included."""
        label = str(self.defaults.relative_to(_PACKAGE)) if self.defaults is not None else ""
        return dataclasses.replace(self.stated, check=self.check, label=label)

    def config(self, **values: Any) -> TaskConfig:
        """Its keys with `values` set (the rest at their defaults), named: what a run's Config holds."""
        return self.keys(name=self.name, **values)

    def check(self, task_cfg: TaskConfig) -> None:
        """Config validation's check of the name and the keys' values (ConfigError); nothing by default."""

    def spec(self, task_cfg: TaskConfig) -> EnvSpec:
        """Shapes and timing of the task, without building a simulation."""
        raise NotImplementedError

    def make_task(self, task_cfg: TaskConfig) -> Task | None:
        """A fresh, unbound Task (cheap: parses nothing until a backend asks); None where the source builds
        a whole VecEnv (mjlab)."""
        return None

    def checked_task(self, task_cfg: TaskConfig) -> Task | None:
        """The Task the checks before a run look at (its spec, the contract probe, its own check): built once
        per configuration in a process, so that a slow factory runs once before the run starts."""
        return self.make_task(task_cfg)

    def make_vec_env(self, task_cfg: TaskConfig, sim_cfg: Any, num_envs: int, device: str, seed: int,
                     nan_guard: bool = True, nan_inject_step: int = -1, compile: bool = False,
                     solver_early_exit: bool = False, play: bool = False, render: bool = False) -> VecEnv:
        """`num_envs` envs of the task (envs/registry.make_vec_env says what each argument means)."""
        raise NotImplementedError

    def first_check(self, task_cfg: TaskConfig) -> list[str]:
        """The task's check of its inputs that runs first, before anything of a run exists (a reference
        clip): warnings, one line each; ConfigError where an input cannot be used."""
        return []

    def resume_restarts(self, task_cfg: TaskConfig) -> list[str]:
        """What a resumed run of this task starts over although training depends on it (a curriculum its env
        keeps outside duorl's checkpoint), one line each; [] by default."""
        return []

    def preflight(self, task_cfg: TaskConfig, task: Task | None) -> list[str]:
        """The checks before any process is spawned, on `task` (make_task's, None for a whole VecEnv):
        its own `check()` (or `validate()`), whose warnings are returned."""
        check = getattr(task, "check", None) or getattr(task, "validate", None)
        return [str(w) for w in (check() or [])] if check is not None else []


@dataclass(frozen=True)
class FactorySource(TaskSource):
    """A task from a factory: builtin, entry point or import path. `target`: the factory's import path
    (`module:attr`); `dist`: the distribution that registers an entry point; `first_check_path`: the import
    path of the builtin task's first check (builtin.Builtin.first_check)."""

    target: str = ""
    dist: str | None = None
    first_check_path: str | None = None

    @property
    def label(self) -> str:
        return f"entry point {self.dist}" if self.kind == "entry point" else self.kind

    @property
    def from_package(self) -> bool:
        """A task from outside duorl (entry point, import path): checked against the Task contract."""
        return self.kind != "builtin"

    def check(self, task_cfg: TaskConfig) -> None:
        """Builtin names pass at once (their tests hold them to the contract); a package's task is made and
        its spec checked."""
        if self.from_package:
            self.spec(task_cfg)

    def spec(self, task_cfg: TaskConfig) -> EnvSpec:
        task = self.checked_task(task_cfg)
        assert task is not None
        return task.spec

    def checked_task(self, task_cfg: TaskConfig) -> Task:
        factory = load_factory(self)
        key = (self.kind, self.target, id(factory), repr(task_cfg))
        task = _CHECKED.get(key)
        if task is None:
            task = self.make_task(task_cfg)
            _CHECKED.clear()  # one configuration per process: keep only the last one's
            _CHECKED[key] = task
        return task

    def make_task(self, task_cfg: TaskConfig) -> Task:
        """ConfigError when the factory fails or returns no Task, the task's spaces cannot be trained, or
        the task ignores task.max_episode_steps."""
        factory = load_factory(self)
        if not self.from_package:
            return factory(task_cfg)
        try:
            task = call_waiting(factory, task_cfg, what=f"task factory {self.target}")
        except InputRefused:
            raise
        except Exception as e:  # noqa: BLE001 - the user's factory: name it and its error
            raise _refuse(self.name, f"the factory {self.target} raised {type(e).__name__}: {_first_line(e)}",
                          "a factory that returns a Task", f"fix {self.target}") from None
        missing = [a for a in TASK_ATTRIBUTES if not hasattr(task, a)]
        if missing:
            raise _refuse(self.name, f"the factory {self.target} returned a {type(task).__name__}, which is no "
                          f"duorl Task (it lacks {', '.join(missing)})", "a Task (envs/tasks/base.py)",
                          f"return a Task from {self.target} (docs/tasks.md)")
        check_spec(task.spec, self.name)
        _check_episode_steps(task.spec, task_cfg, self.target)
        return task

    def make_vec_env(self, task_cfg: TaskConfig, sim_cfg: Any, num_envs: int, device: str, seed: int,
                     nan_guard: bool = True, nan_inject_step: int = -1, compile: bool = False,
                     solver_early_exit: bool = False, play: bool = False, render: bool = False) -> VecEnv:
        from duorl.envs.task_env import build_task_vec_env

        return build_task_vec_env(self.make_task(task_cfg), sim_cfg, num_envs, device, seed, nan_guard,
                                  nan_inject_step, compile, solver_early_exit)

    def first_check(self, task_cfg: TaskConfig) -> list[str]:
        if self.first_check_path is None:
            return []
        module_name, _, attr = self.first_check_path.partition(":")
        return list(getattr(importlib.import_module(module_name), attr)(task_cfg))

    def preflight(self, task_cfg: TaskConfig, task: Task | None) -> list[str]:
        """A package's task steps once in two MuJoCo C worlds against the Task contract (envs/task_probe.py)
        on a task of its own; then the task's own check."""
        if self.from_package:
            from duorl.envs.task_probe import probe_task

            probe_task(task if task is not None else self.checked_task(task_cfg), self.name)
        return super().preflight(task_cfg, task)


@dataclass(frozen=True)
class MjlabSource(TaskSource):
    """An mjlab task, `mjlab:<task_id>`: a whole VecEnv that duorl.envs.mjlab builds (its family's facts:
    envs/mjlab/family.py)."""

    task_id: str = ""

    def check(self, task_cfg: TaskConfig) -> None:
        """Its family's keys (a required clip) before mjlab is imported, mjlab installed and the id known, then
        the family's check against mjlab's configuration (a clip against the robot); its spec, which builds
        the task once, is checked when a run asks for it, still before anything of the run is built."""
        mjlab_family.check_inputs(self.task_id, task_cfg)
        adapter, task_id = _mjlab_task(self.name)
        adapter.check_inputs(task_id, task_cfg)

    def spec(self, task_cfg: TaskConfig) -> EnvSpec:
        adapter, task_id = _mjlab_task(self.name)
        spec = adapter.task_spec(task_id, task_cfg)
        check_spec(spec, self.name)
        return spec

    def resume_restarts(self, task_cfg: TaskConfig) -> list[str]:
        adapter, task_id = _mjlab_task(self.name)
        return adapter.resume_restarts(task_id, task_cfg)

    def make_vec_env(self, task_cfg: TaskConfig, sim_cfg: Any, num_envs: int, device: str, seed: int,
                     nan_guard: bool = True, nan_inject_step: int = -1, compile: bool = False,
                     solver_early_exit: bool = False, play: bool = False, render: bool = False) -> VecEnv:
        """It steps MuJoCo Warp whatever sim_cfg says (config validation refused any other)."""
        adapter, task_id = _mjlab_task(self.name)
        return adapter.make_vec_env(task_id, task_cfg, num_envs, device, seed, play=play, render=render,
                                    staged_step=sim_cfg.mjlab_staged_step, reset_graphs=sim_cfg.mjlab_reset_graphs)


def _mjlab_source(name: str) -> MjlabSource:
    task_id = name[len(mjlab_family.PREFIX):]
    return MjlabSource("mjlab", mjlab_family.facts(name, task_id), task_id=task_id)


# ------------------------------------------------------------------------------------ resolution
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
    """The one source of `name`. A builtin or mjlab name resolves without importing the task; an entry
    point or import path imports its factory (it declares the task's keys). ConfigError for an unknown or
    ambiguous name, or a factory that does not load."""
    if name.startswith(mjlab_family.PREFIX):
        return _mjlab_source(name)
    if ":" in name:
        if not _IMPORT_PATH.fullmatch(name):
            raise _refuse(name, "not an import path", "package.module:factory (dotted names, one colon)",
                          "write it as --task package.module:factory")
        return _package_source(name, "import path", name)
    eps = _entry_points().get(name, [])
    if name in BUILTIN and eps:
        raise _refuse(name, f"is both a builtin task and an entry point of {_dist_name(eps[0])}", "one source per name",
                      f"rename the entry point, or train it by import path: --task {eps[0].value}")
    if len(eps) > 1:
        where = ", ".join(f"{_dist_name(ep)} ({ep.value})" for ep in eps)
        raise _refuse(name, f"is registered by several `{ENTRY_POINT_GROUP}` entry points: {where}",
                      "one source per name", f"train one of them by import path, e.g. --task {eps[0].value}")
    if eps:
        return _package_source(name, "entry point", eps[0].value, _dist_name(eps[0]))
    if name in BUILTIN:
        b = BUILTIN[name]
        return FactorySource("builtin", TaskFacts(name, b.keys, defaults_of(name)), target=b.factory,
                             first_check_path=b.first_check)
    close = difflib.get_close_matches(name, task_names(), n=3, cutoff=0.5)
    fix = f"did you mean {' or '.join(close)}? " if close else "pick one with --task; "
    raise _refuse(name, "unknown task", ", ".join(task_names()),
                  f"{fix}`duorl tasks` lists every task, and a task of your own runs as --task package.module:factory")


def task_config(name: str, **values: Any) -> TaskConfig:
    """The keys of the task `name` with `values` set, the rest at their defaults (its source's dataclass:
    what a run's Config holds as `task`). ConfigError as source_of."""
    return source_of(name).config(**values)


def _package_source(name: str, kind: str, target: str, dist: str | None = None) -> FactorySource:
    """An entry point's or import path's source, its keys read from its factory's `config_class`."""
    source = FactorySource(kind, TaskFacts(name), target=target, dist=dist)
    keys = getattr(load_factory(source), CONFIG_CLASS, None)
    if keys is None:
        return source
    check_keys_class(keys, name, target)
    return dataclasses.replace(source, stated=TaskFacts(name, keys))


def check_keys_class(keys: Any, name: str, target: str) -> None:
    """A factory's `config_class`: a dataclass extending TaskConfig whose own keys are each declared with
    config.schema.setting (a default and a one-line meaning). ConfigError naming the task otherwise."""
    fix = f"make {target}.{CONFIG_CLASS} a @dataclass extending duorl.config.schema.TaskConfig (docs/tasks.md)"
    if not (isinstance(keys, type) and issubclass(keys, TaskConfig) and dataclasses.is_dataclass(keys)):
        raise _refuse(name, f"{target}.{CONFIG_CLASS} is a {type(keys).__name__}, not a dataclass extending TaskConfig",
                      "a TaskConfig dataclass", fix)
    generic = {f.name for f in dataclasses.fields(TaskConfig)}
    bare = [f.name for f in dataclasses.fields(keys) if f.name not in generic and setting_of(f) is None]
    if bare:
        raise _refuse(name, f"{target}.{CONFIG_CLASS} declares {', '.join(bare)} without setting(default, help)",
                      "keys declared with duorl.config.schema.setting", f"declare each key as `name: type = "
                      "setting(default, \"one-line meaning\")` (docs/tasks.md)")


def load_factory(source: FactorySource) -> Callable[[TaskConfig], Task]:
    """Import the factory of a builtin, entry-point or import-path task. ConfigError naming the task and
    the error when it does not import or is not callable."""
    module_name, _, attr = source.target.partition(":")
    what = f"the {source.kind} {source.name}" + (f" ({source.target})" if source.target != source.name else "")
    try:
        obj: Any = import_task_module(module_name) if source.from_package else importlib.import_module(module_name)
    except ExitAtImport as e:
        said = f" after writing {e.said!r}" if e.said else ""
        raise _refuse(source.name, f"{what}: importing {module_name} called {e.how}{said}",
                      "a module that defines its factory without ending the process (no sys.exit, os._exit or "
                      "argument parsing at import)", f"move that code of {module_name} under "
                      "`if __name__ == \"__main__\":`") from None
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


# ------------------------------------------------------------------------------------------ mjlab
def mjlab_module() -> Any:
    """duorl.envs.mjlab (the adapter: check_installed, task_ids, task_spec, make_vec_env), once mjlab itself
    is installed; InputRefused naming the install command."""
    mjlab_adapter.check_installed()
    return mjlab_adapter


def _mjlab_task(name: str) -> tuple[Any, str]:
    """(duorl.envs.mjlab, the task id) for a known mjlab id; ConfigError with the closest ids otherwise."""
    try:
        adapter = mjlab_module()
    except InputRefused as e:  # check_installed's own line, without its fix (named once, here)
        raise ConfigError(KEY, name, str(e).split(" Fix: ")[0].rstrip("."), "the mjlab extra", mjlab_family.INSTALL) from None
    task_id = name[len(mjlab_family.PREFIX):]
    ids = list(adapter.task_ids())
    if task_id not in ids:
        close = difflib.get_close_matches(task_id, ids, n=3, cutoff=0.5)
        allowed = ", ".join(mjlab_family.PREFIX + i for i in close) if close else f"{len(ids)} ids (`duorl tasks`)"
        fix = f"did you mean {mjlab_family.PREFIX}{close[0]}?" if close else "pick an id that `duorl tasks` lists"
        raise ConfigError(KEY, name, "unknown mjlab task id", f"closest: {allowed}" if close else allowed, fix)
    return adapter, task_id


# ------------------------------------------------------------------------------------------ checks
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
    _check_mirror(spec, name)


def _check_mirror(spec: Any, name: str) -> None:
    """A mirror is an envs.base.Mirror, whose construction checks each part is a signed permutation that is
    its own inverse (learners mirror batches with it: one that is not would teach a wrong symmetry)."""
    from duorl.envs.base import Mirror

    m = spec.mirror
    if m is None or isinstance(m, Mirror):
        return
    try:
        Mirror(m.actor_obs, m.critic_obs, m.action)
        why = ""
    except (AttributeError, TypeError, ValueError) as e:
        why = f" ({_first_line(e)})"
    raise _refuse(name, f"its spec's mirror is a {type(m).__name__}, not a duorl.envs.base.Mirror{why}",
                  "None, or a Mirror of signed permutations that mirroring twice undoes",
                  "build it with duorl.envs.base.Mirror(actor_obs, critic_obs, action) (docs/tasks.md)")


def _check_episode_steps(spec: Any, task_cfg: TaskConfig, target: str) -> None:
    """A package factory builds its task with task.max_episode_steps where the run sets it."""
    want = task_cfg.max_episode_steps
    if want is not None and spec.max_episode_steps != want:
        raise ConfigError("task.max_episode_steps", want, f"the factory {target} ignores it: its task's spec says "
                          f"max_episode_steps={spec.max_episode_steps}", "a factory that builds its task with "
                          "cfg.max_episode_steps when it is set", f"pass cfg.max_episode_steps to the task in {target} "
                          "(docs/tasks.md), or remove the key")


def check_symmetry(spec: Any, use_symmetry: bool) -> None:
    """algo.use_symmetry=true needs a task that describes its left-right mirror (EnvSpec.mirror)."""
    if use_symmetry and getattr(spec, "mirror", None) is None:
        raise ConfigError("algo.use_symmetry", True, f"needs a task that describes its left-right mirror, and "
                          f"{spec.task} does not", "true (tasks with a mirror, e.g. g1_walk_flat), false",
                          "set algo.use_symmetry=false")


# -------------------------------------------------------------------------------------- listing
def task_catalog() -> TaskCatalog:
    """The tasks `duorl config --keys` and docs/configuration.md list with their keys: the builtin ones,
    every entry point (its factory imported for its keys; one that does not load becomes a note) and the
    mjlab families (nothing of mjlab imported)."""
    facts: list[TaskFacts] = []
    notes: list[str] = []
    for name in task_names():
        try:
            facts.append(source_of(name).facts())
        except ConfigError as e:
            notes.append(f"{name}: its keys cannot be read: {e.problem}")
    facts.append(mjlab_family.facts(f"{mjlab_family.PREFIX}ID", ""))
    facts += [mjlab_family.facts(f"{mjlab_family.PREFIX}{f.label}", "", f.keys) for f in mjlab_family.FAMILIES]
    return TaskCatalog(tuple(facts), ALLOWED, DEFAULT_TASK, tuple(notes))


TRAINABLE = "trainable"


@dataclass(frozen=True)
class TaskEntry:
    """One row of `duorl tasks`: sizes and `status` (`trainable`, or why not); `error` where a registered
    task or package cannot be loaded (the listing's exit code 1)."""

    name: str
    source: str
    actor_obs_dim: int | None = None
    critic_obs_dim: int | None = None
    action_dim: int | None = None
    mirror: bool = False
    status: str = TRAINABLE
    error: str | None = None


def _broken(name: str, source: str, error: str) -> TaskEntry:
    return TaskEntry(name, source, status=f"cannot be loaded: {error}", error=error)


def _entry(name: str, source: str, spec_of: Callable[[], Any]) -> TaskEntry:
    try:
        spec = spec_of()
    except Exception as e:  # noqa: BLE001 - a listing shows a broken task, it does not stop at it
        return _broken(name, source, _first_line(e))
    return TaskEntry(name, source, spec.actor_obs_dim, spec.critic_obs_dim, spec.action_dim, spec.mirror is not None)


def list_tasks(refresh: bool = False) -> tuple[list[TaskEntry], list[str]]:
    """Every task duorl can train here (builtin, entry points, mjlab's when installed: from its cache
    unless `refresh`) and notes (one line each, e.g. that mjlab is not installed). Specs only: no
    simulation is built (mjlab's sizes need one env of each task, built when its cache is)."""
    entries: list[TaskEntry] = []
    eps = _entry_points()
    for name in task_names():
        try:
            source = source_of(name)
        except ConfigError as e:  # an ambiguous name, or an entry point whose factory does not load
            one = eps.get(name, [])
            label = f"entry point {_dist_name(one[0])}" if len(one) == 1 and name not in BUILTIN else "?"
            entries.append(_broken(name, label, e.problem))
            continue
        entries.append(_entry(name, source.label, lambda: source.spec(source.config())))
    notes: list[str] = []
    try:
        adapter = mjlab_module()
    except InputRefused:
        notes.append(f"mjlab: not installed ({mjlab_family.INSTALL})")
    else:
        for row in adapter.task_rows(refresh):
            entries.append(TaskEntry(row.name, row.source, row.actor_obs_dim, row.critic_obs_dim, row.action_dim,
                                     False, row.status, row.error))
    return entries, notes
