"""Everything a run can refuse that the configuration's own checks cannot see, checked before the run
directory exists (docs/design.md §8): the task's fit to the run (algo.use_symmetry needs a mirror), the task
source's checks (envs/task_sources.TaskSource.preflight: a task from outside duorl steps once against the
Task contract; the task's own check of its inputs, e.g. the G1 tasks' model builds into a G1; a reference
clip is checked just before, by the source's first_check), the debug hooks' names and the run directory's path. A refusal is one line naming the key or file, the value and the fix; `duorl train` exits 2 and
leaves nothing behind (docs/exit_codes.md). The checkpoint of `training.resume` is checked next, when
`duorl train`'s resume step loads it (cli/train_steps/resume.py, through duorl/cli/resume.py), still before the
directory exists.

The task hook: an unbound task may define `check() -> list[str] | None` (or `validate()`), which raises
a ConfigError for input it cannot use and returns warnings; it runs here (through its source), in the
learner, before any process is spawned.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from duorl.config.errors import ConfigError, InputRefused
from duorl.config.schema import Config
from duorl.envs.task_sources import TaskSource, check_symmetry


@dataclass(frozen=True)
class Preflight:
    problem: str | None = None  # the refusal, one line (None: the run may start)
    warnings: list[str] = field(default_factory=list)


def _check_slow_phase(cfg: Config) -> None:
    """debug.slow_phase names a phase of a duo process: checked here only, since the phases are the
    runtime's (config.validate, below it, cannot know them)."""
    from duorl.runtime.heartbeat import PHASES, known_phase

    v = cfg.debug.slow_phase
    if v is not None and not known_phase(v):
        names = "; ".join(f"{side}: {', '.join(p)}" for side, p in PHASES.items())
        raise ConfigError("debug.slow_phase", v, "names no phase of a duo process (PROCESS:PHASE)", names,
                          "e.g. debug.slow_phase='learner:writing a checkpoint', or remove the key")


def no_update_warning(cfg: Config) -> str | None:
    """A fresh run whose replay never reaches algo.learning_starts before its last iteration ends without an
    update (it completed with zero updates and no word): the warning naming the keys, or None."""
    algo, tr = cfg.algo, cfg.training
    if algo.updates_per_step <= 0 or tr.resume:
        return None
    ticks = (algo.max_iterations - 1) * tr.env_steps_per_sync  # collected before the last iteration's update
    if ticks >= max(algo.learning_starts, 1):
        return None
    need = -(-max(algo.learning_starts, 1) // tr.env_steps_per_sync) + 1
    return (f"algo.learning_starts={algo.learning_starts}: the run collects {ticks} ticks before its last iteration "
            f"(algo.max_iterations={algo.max_iterations} x training.env_steps_per_sync={tr.env_steps_per_sync}), so "
            f"it will end without a single update. Fix: lower algo.learning_starts below {ticks + 1} or raise "
            f"algo.max_iterations to at least {need}")


def check_log_dir(cfg: Config) -> None:
    """training.log_dir (or the default run directory) does not exist yet and can be created."""
    from duorl.telemetry.run_dir_claim import check_new_run_dir
    from duorl.telemetry.run_directory import default_run_dir

    log_dir = cfg.training.log_dir
    check_new_run_dir(log_dir if log_dir else default_run_dir(cfg.task.name, cfg.algo.name), default=not log_dir)


def preflight(cfg: Config, source: TaskSource, spec: Any, task: Any, lead: bool = True) -> Preflight:
    """The checks above, in order, for the task's source, its EnvSpec and its unbound Task (None: an mjlab
    task, a whole VecEnv); `lead`: this process will create the run directory (rank 0)."""
    try:
        _check_slow_phase(cfg)
        check_symmetry(spec, cfg.algo.use_symmetry)
        warnings = source.preflight(cfg.task, task)
        late = no_update_warning(cfg)
        if late is not None and lead:
            warnings.append(late)
        if lead:
            check_log_dir(cfg)
    except InputRefused as e:
        return Preflight(problem=str(e))
    return Preflight(warnings=warnings)


def check_output_file(path: str, what: str, source: tuple[str, str] | None = None) -> None:
    """A command's output file can be written (its folder exists, or can be made, and takes a file;
    the path is no folder) and, with `source` = (name, path) of the command's input, is not that input
    (the command would overwrite what it reads). Creates nothing. ConfigError naming `what`=path otherwise."""
    import os
    from pathlib import Path

    p = Path(path)
    fix = f"give {what} a path in a writable folder"
    if p.is_dir():
        raise ConfigError(what, path, "is a folder", "a file path", fix)
    if source is not None and _same_file(p, Path(source[1])):
        name = source[0]
        raise ConfigError(what, path, f"is {name} itself ({source[1]}): the output would overwrite the input",
                          f"a file other than {name}", f"write to another file, e.g. {p.with_name(p.stem + '_out' + p.suffix)}")
    ancestor = p.absolute().parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise ConfigError(what, path, f"cannot be written: {ancestor} is a file", "a file path", fix)
    probe = ancestor / f".{p.name}.probe-{os.getpid()}"
    try:
        with open(probe, "x"):
            pass
    except OSError as e:
        raise ConfigError(what, path, f"cannot be written in {ancestor} ({e.strerror or e})", "a file path", fix) from None
    probe.unlink()


def _same_file(a: "Path", b: "Path") -> bool:
    """The same file (by inode where both exist: links and other spellings of a path count)."""
    import os

    try:
        return os.path.samefile(a, b)
    except OSError:  # one does not exist (yet): compare the paths
        return a.expanduser().resolve() == b.expanduser().resolve()
