"""`training.resume`: find the checkpoint, check that this run's config can continue it, and turn it
into the learner's and the runtime's state."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from duorl.config.errors import ConfigError, format_value
from duorl.config.keys import flatten, may_differ_on_resume
from duorl.config.schema import TaskConfig
from duorl.runtime.checkpoint import CheckpointError, checkpoint_files, latest_checkpoint, load_checkpoint
from duorl.runtime.duo import ResumeState

# what a checkpoint is of: when these differ, every other mismatch follows from them (named first)
IDENTITY = ("task.name", "algo.name")


def config_mismatches(saved: dict[str, Any], current: dict[str, Any],
                      task_keys: type[TaskConfig] = TaskConfig) -> list[str]:
    """Keys (dotted) whose values differ and may not, as 'key: checkpoint=A, now=B'. `task_keys`: the
    current task's dataclass of keys (its own keys' resume rules)."""
    a, b = flatten(saved), flatten(current)
    # a resumed run may change where and how long it runs, how it reports, and test hooks (the schema's
    # resume=MAY_DIFFER); every other key shapes the learner, the replay or the envs
    may_differ = may_differ_on_resume(task_keys)
    out = []
    for key in sorted(set(a) | set(b)):
        if key in may_differ:
            continue
        if key.startswith("task.") and key not in b:
            continue  # a task key this task no longer declares (a checkpoint of a duorl that gave every task all)
        if a.get(key) != b.get(key):
            out.append(f"{key}: checkpoint={a.get(key)!r}, now={b.get(key)!r}")
    return out


def missing_task_state(collector: dict[str, Any] | None, expected: tuple[str, ...]) -> list[str]:
    """The task-state entries this version's task restores (`expected`) that the checkpoint's collector
    snapshot lacks: a checkpoint written before the task kept them."""
    task_state = ((collector or {}).get("env") or {}).get("task")
    if task_state is None:
        return []
    return [k for k in expected if k not in task_state]


def load_resume(resume: str, current_config: dict[str, Any], task_state_keys: tuple[str, ...] = (),
                world_size: int = 1, task_keys: type[TaskConfig] = TaskConfig
                ) -> tuple[Path, dict[str, Any], list[ResumeState]]:
    """Returns (checkpoint path, the learner's state, the runtime's resume state of every rank); raises
    ConfigError naming the mismatching keys when the config cannot continue this checkpoint, a world
    size other than the checkpoint's, or the task-state entries (`task_state_keys`, what this
    version's task restores) the checkpoint lacks."""
    check_resumed_run(resume)
    path: Path | None = None
    try:
        path = latest_checkpoint(Path(resume))
        data = load_checkpoint(path)
    except CheckpointError as e:
        raise _unreadable(resume, e, path) from None
    saved = data.get("config")
    if saved is None:
        raise ConfigError("training.resume", resume, f"checkpoint {path} holds no config", "a duorl checkpoint",
                          "resume from a checkpoint written by duorl train")
    _check_identity(resume, path, saved, current_config, task_keys)
    runtime = data["runtime"]
    ranks = runtime.get("ranks") or [runtime]  # a data-parallel checkpoint holds every rank's state
    saved_world = int(runtime.get("world_size", len(ranks)))
    if saved_world != world_size:
        raise ConfigError(
            "training.resume", resume,
            f"{path} was written by a run of world size {saved_world}, and this run has world size {world_size}",
            f"a run of world size {saved_world}",
            f"resume with {saved_world} device(s) in training.devices (one rank each), or start a new run",
        )
    _check_keys(resume, path, saved, current_config, task_keys)
    missing = sorted({k for r in ranks for k in missing_task_state(r.get("collector"), task_state_keys)})
    if missing:
        task = current_config.get("task", {}).get("name")
        raise ConfigError(
            "training.resume", resume,
            f"{path} was written by an older duorl: its {task} task state lacks {', '.join(missing)}, which "
            "this version's task restores", "a checkpoint written by this duorl version",
            "start a new run, or resume it with the duorl version that wrote it",
        )
    _check_iterations(path, int(data["header"]["iteration"]), current_config)
    states = [
        ResumeState(
            iteration=int(data["header"]["iteration"]),
            replay_generator=r["replay_generator"],
            collector=r.get("collector"),
            replay=r.get("replay"),
            replay_origin=int(r.get("replay_origin", 0)),
        )
        for r in ranks
    ]
    return path, data["learner"], states


def check_resumed_run(resume: str) -> None:
    """The run to resume has ended (issue #39): one still going (its process alive, a stopped one too) is
    refused, since both would train on from the same checkpoint; one that died without an outcome (every
    process killed at once) is said and recorded in its summary. Scratch folders that runs killed that
    way left on this host go too."""
    import sys

    from duorl.distributed.rank_scratch import remove_dead_rank_scratch
    from duorl.telemetry.earlier_run import earlier_run, record_dead, run_dir_of

    for folder in remove_dead_rank_scratch():
        print(f"duorl: removed {folder}, a scratch folder left by a run killed at once", file=sys.stderr,
              flush=True)
    run_dir = run_dir_of(Path(resume))
    run = earlier_run(run_dir) if run_dir is not None else None
    if run is None:
        return
    if run.is_open and run.alive:
        raise ConfigError(
            "training.resume", resume,
            f"the run there is still going ({run.who()}, status '{run.status}', {run.progress()}; a stopped process, "
            "SIGSTOP, counts as going): both would train on from the same checkpoint",
            "a run that has ended",
            f"let it end, or stop it first (`kill -CONT {run.summary['process']['pid']}` if stopped, then Ctrl-C or "
            "SIGTERM: it writes a final checkpoint to resume from)",
        )
    if run.dead:
        message = record_dead(run, f"resuming {resume}")
        print(f"duorl: note: {message}; recorded in its run_summary.json (status failed), resuming its last "
              "checkpoint", file=sys.stderr, flush=True)


def _unreadable(resume: str, e: CheckpointError, bad: Path | None) -> ConfigError:
    """The checkpoint (or its latest.json) cannot be read: the fix names another one of that run."""
    r = Path(resume)
    folder = r.parent if r.is_file() else (r / "checkpoints" if (r / "checkpoints").is_dir() else r)
    others = [n for n in checkpoint_files(r) if bad is None or n != bad.name]
    fix = (f"resume from another checkpoint of that run, e.g. training.resume={folder / others[-1]} (there: "
           f"{', '.join(others)})") if others else "resume from another run, or start a new run without training.resume"
    return ConfigError("training.resume", resume, str(e), "a readable duorl checkpoint", fix)


def identity_mismatch(path: Path, saved: dict[str, Any], current: dict[str, Any], task_keys: type[TaskConfig],
                      this: str = "this run") -> tuple[str, str, str] | None:
    """A checkpoint of another task or algorithm than `current` (resume and `duorl play --checkpoint` share
    it): (the problem, what is allowed, the checkpoint's --task/--algo), or None where both agree."""
    a, b = flatten(saved), flatten(current)
    if all(a.get(k) == b.get(k) for k in IDENTITY):
        return None
    more = len(config_mismatches(saved, current, task_keys)) - sum(a.get(k) != b.get(k) for k in IDENTITY)
    then, now = (f"--task {x.get('task.name')} --algo {x.get('algo.name')}" for x in (a, b))
    return (f"{path} was written by a {then} run, and {this} is {now}"
            + (f" ({more} more keys differ with it)" if more > 0 else ""), f"a checkpoint of a {now} run", then)


def _check_identity(resume: str, path: Path, saved: dict[str, Any], current: dict[str, Any],
                    task_keys: type[TaskConfig]) -> None:
    """A checkpoint of another task or algorithm: the cause, named before anything that follows from it."""
    found = identity_mismatch(path, saved, current, task_keys)
    if found is not None:
        problem, allowed, then = found
        raise ConfigError("training.resume", resume, problem, allowed,
                          f"resume it with {then} (the checkpoint's), or start a new run without training.resume")


def _check_keys(resume: str, path: Path, saved: dict[str, Any], current: dict[str, Any],
                task_keys: type[TaskConfig]) -> None:
    """Keys that shape the learner, the replay or the envs must be the checkpoint's; the fix sets them."""
    bad = config_mismatches(saved, current, task_keys)
    if not bad:
        return
    a = flatten(saved)
    keys = [line.split(":", 1)[0] for line in bad]
    newer = [k for k in keys if k not in a]
    if newer:
        raise ConfigError(
            "training.resume", resume, f"{path} was written by an older duorl, without {', '.join(newer)}",
            "a checkpoint written by this duorl version", "start a new run, or resume it with the duorl version that wrote it",
        )
    sets = " ".join(f"{k}={format_value(a[k])}" for k in keys)
    raise ConfigError(
        "training.resume", resume, f"this config cannot continue {path}: " + "; ".join(bad),
        "the checkpoint's values for these keys",
        f"set them to the checkpoint's values: {sets} (a resumed run may change only where and how long it runs "
        "and how it reports: the keys docs/configuration.md marks 'may differ')",
    )


def _check_iterations(path: Path, iteration: int, current: dict[str, Any]) -> None:
    """A resumed run trains from the checkpoint's iteration up to algo.max_iterations: none left would
    'complete' having trained nothing."""
    target = current.get("algo", {}).get("max_iterations")
    if isinstance(target, int) and target <= iteration:
        raise ConfigError(
            "algo.max_iterations", target,
            f"the checkpoint {path} is at iteration {iteration}, and a resumed run trains from there up to "
            "algo.max_iterations: nothing would be trained", f"integers > {iteration}",
            f"set algo.max_iterations to the total wanted, more than {iteration}, e.g. algo.max_iterations={2 * iteration}",
        )
