"""Range and consistency checks on a merged Config, run before anything is built (fail closed).

Each failure is a ConfigError naming the dotted key, its value, what is allowed and the fix. Every
bad key is reported at once (ConfigErrors, one line). Each key is first checked against its own
`setting(...)` in config/schema.py (type, bounds, choices); the rules between keys are the named
functions below (_CROSS_CHECKS and the task's), each run only when the keys it reads passed their own
checks (a cross-key message about a value that is already wrong would be noise). Devices come last (they
may import torch to probe CUDA); the device-dependent switches run only once the names and devices are
good.
"""

from __future__ import annotations

import math
import os
import typing
from typing import Any

from duorl.config.devices import RANK_DEVICE_ENV, entry_kind, resolve_device, resolve_entry
from duorl.config.errors import ConfigError, ConfigErrors, format_value
from duorl.config.keys import bounds_text, data_parallel_only, default_of, leaves, number_text
from duorl.config.schema import DEVICES_ALLOWED, Config, Setting, setting_of
from duorl.config.tasks import TaskFacts

__all__ = ["validate", "resolve_device", "check_data_parallel_keys"]


class _Problems:
    """The ConfigErrors found so far, at most one per key (the first, most basic one)."""

    def __init__(self) -> None:
        self.errors: list[ConfigError] = []

    def bad(self, *keys: str) -> bool:
        """Some of `keys` (or a key below one of them, e.g. training.devices) already failed."""
        return any(e.key == k or e.key.startswith(k + ".") for e in self.errors for k in keys)

    def check(self, fn: Any, *args: Any, needs: tuple[str, ...] = ()) -> None:
        """Run one check; `needs`: the keys it reads besides its own, skipped if one of them failed."""
        if needs and self.bad(*needs):
            return
        try:
            fn(*args)
        except ConfigError as e:
            if not self.bad(e.key):
                self.errors.append(e)

    def raise_any(self) -> None:
        if len(self.errors) == 1:
            raise self.errors[0]
        if self.errors:
            raise ConfigErrors(self.errors)


def _get(cfg: Config, key: str) -> Any:
    node: Any = cfg
    for part in key.split("."):
        node = getattr(node, part)
    return node


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _violated(s: Setting, v: float) -> str:
    """The bound `v` breaks, as '>= 1' or '< 1' ('' when it keeps them all)."""
    for op, bound, broken in ((">=", s.min, lambda b: v < b), (">", s.above, lambda b: v <= b),
                              ("<=", s.max, lambda b: v > b), ("<", s.below, lambda b: v >= b)):
        if bound is not None and broken(bound):
            return f"{op} {number_text(bound)}"
    return ""


def _out_of_range(key: str, v: Any, s: Setting, kind: str) -> ConfigError:
    bound = _violated(s, v)
    if s.fix:
        fix = s.fix
    elif kind == "integers" and bound.startswith(">="):
        fix = f"set {key}={bound[3:]} or more"
    elif bound.startswith("<"):
        fix = f"set {key}={format_value(default_of(key))} (the default) or another value {bound}"
    else:
        fix = f"set {key} to a value {bound}"
    return ConfigError(key, v, f"must be {bound}", f"{kind} {bounds_text(s)}", fix)


def _check_number(key: str, v: Any, s: Setting, integer: bool) -> None:
    if integer and not _is_int(v):
        raise ConfigError(key, v, "not an integer", f"integers {bounds_text(s)}", f"set {key} to an integer")
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ConfigError(key, v, "not a number", "finite floats", f"set {key} to a number")
    if not math.isfinite(v):
        raise ConfigError(key, v, "not finite", "finite floats", f"set {key} to a finite number")
    if _violated(s, v):
        raise _out_of_range(key, v, s, "integers" if integer else "floats")


def _check_text(key: str, v: Any, s: Setting, optional: bool) -> None:
    if s.choices is None:  # free-form: checked where its Setting.allowed says
        if not isinstance(v, str):
            raise ConfigError(key, v, "not a text", str(s.allowed or "text"), f"quote the value of {key}")
        return
    if v not in s.choices:
        shown = (("null",) if optional else ()) + s.choices
        also = f" (or {', '.join(shown[1:])})" if len(shown) > 1 else ""
        section, _, leaf = key.rpartition(".")
        what = f"{section.rsplit('.', 1)[-1]} name" if leaf == "name" else leaf.replace("_", " ")  # unknown algo name
        raise ConfigError(key, v, f"unknown {what}", ", ".join(shown), s.fix or f"set {key}={shown[0]}{also}")


def _check_int_list(key: str, v: Any, s: Setting) -> None:
    if not isinstance(v, (list, tuple)) or not v or not all(_is_int(d) and not _violated(s, d) for d in v):
        raise ConfigError(key, v, f"must be a non-empty list of integers {bounds_text(s)}", f"[int {bounds_text(s)}, ...]",
                          f"e.g. {key}={format_value(s.example)}")


def _check_setting(cfg: Config, key: str, tp: Any, s: Setting) -> None:
    """One key against its own Setting: its type, bounds and choices."""
    v = _get(cfg, key)
    args = typing.get_args(tp)
    optional = typing.get_origin(tp) is typing.Union and type(None) in args
    base = next(a for a in args if a is not type(None)) if optional else tp
    if v is None and optional:
        return
    if base is bool:
        if not isinstance(v, bool):
            allowed, fix = ("null, true, false", f"remove the key or set {key}=false") if optional else \
                ("true, false", f"set {key}=true or {key}=false")
            raise ConfigError(key, v, "not a boolean or null" if optional else "not a boolean", allowed, fix)
    elif base in (int, float):
        _check_number(key, v, s, integer=base is int)
    elif base is str:
        _check_text(key, v, s, optional)
    elif typing.get_origin(base) is list and typing.get_args(base) == (int,):
        _check_int_list(key, v, s)
    # list[Any] (training.devices): its own check, _check_devices


def _check_settings(cfg: Config, p: "_Problems") -> None:
    """Every key of the run, its task's included (the task section is the task's own dataclass)."""
    for key, (tp, f) in leaves(type(cfg.task)).items():
        s = setting_of(f)
        if s is not None:
            p.check(_check_setting, cfg, key, tp, s)


def _check_task_sim(cfg: Config, task: TaskFacts) -> None:
    """A task that steps one physics backend only (TaskFacts.sim) gets that one."""
    if task.sim is not None and cfg.sim.name != task.sim:
        raise ConfigError("sim.name", cfg.sim.name, f"the task {task.name} always steps {task.sim_reason or task.sim}",
                          task.sim, f"use --sim {task.sim}")


def _check_tick_facts(cfg: Config, task: TaskFacts) -> None:
    """sim.tick_cuda_graph=true and sim.tick_compile=true for a task whose tick cannot hold them (its facts
    say why: an env step that syncs the host, or code that is not duorl's to compile)."""
    if cfg.sim.tick_cuda_graph is True and task.tick_eager_reason is not None:
        raise ConfigError("sim.tick_cuda_graph", True, f"{task.tick_eager_reason}, so the collector tick of "
                          f"{task.name} runs eagerly", "null or false", "remove sim.tick_cuda_graph")
    if cfg.sim.tick_compile is True and task.tick_compile_reason is not None:
        raise ConfigError("sim.tick_compile", True, f"it compiles the tensor code of duorl's own tasks, and "
                          f"{task.tick_compile_reason}", "null or false", "remove sim.tick_compile")
    if cfg.sim.mjlab_staged_step is True and not task.steps_in_stages:
        raise ConfigError("sim.mjlab_staged_step", True, f"only an mjlab task steps in stages, and this run's task "
                          f"is {task.name}", "null or false", "remove sim.mjlab_staged_step")
    if cfg.sim.mjlab_reset_graphs is True and not task.steps_in_stages:
        raise ConfigError("sim.mjlab_reset_graphs", True, f"it captures the reset of mjlab's staged step, and this "
                          f"run's task is {task.name}", "null or false", "remove sim.mjlab_reset_graphs")
    if cfg.sim.mjlab_reset_graphs is True and cfg.sim.mjlab_staged_step is False:
        raise ConfigError("sim.mjlab_reset_graphs", True, "the reset graphs are part of the staged step, which "
                          "sim.mjlab_staged_step=false turns off", "null or false",
                          "remove sim.mjlab_reset_graphs, or set sim.mjlab_staged_step to null")


def _check_task_facts(cfg: Config, task: TaskFacts, p: "_Problems") -> None:
    """The rules a task's facts set for the sim keys (known without importing the task's library)."""
    p.check(_check_task_sim, cfg, task, needs=("task.name", "sim.name"))
    p.check(_check_tick_facts, cfg, task, needs=("task.name",))


def _check_task_keys(cfg: Config, task: TaskFacts, p: "_Problems") -> None:
    """The task layer's own check of the name and its keys (TaskFacts.check). It may import the task's
    library (mjlab's registry: 7-25 s), so it runs once every cheaper check has passed: a wrong --sim or
    device is refused at once."""
    if task.check is not None and not p.errors:
        p.check(task.check, cfg.task)


def _check_support(cfg: Config) -> None:
    a = cfg.algo
    if not a.v_min < a.v_max:
        raise ConfigError("algo.v_min", a.v_min, f"must be below algo.v_max={a.v_max:g}", "v_min < v_max",
                          "set the critic support to cover the discounted return, e.g. algo.v_min=-20 algo.v_max=20")


def _check_log_std(cfg: Config) -> None:
    a = cfg.algo
    if not a.log_std_min < a.log_std_max:
        raise ConfigError("algo.log_std_min", a.log_std_min, f"must be below algo.log_std_max={a.log_std_max:g}",
                          "log_std_min < log_std_max", "e.g. algo.log_std_min=-5 algo.log_std_max=0")


def _check_eval_envs(cfg: Config) -> None:
    t = cfg.training
    if t.eval_envs >= t.num_envs:
        raise ConfigError("training.eval_envs", t.eval_envs,
                          f"must be below training.num_envs={t.num_envs} (at least one env must explore)",
                          f"0 .. {t.num_envs - 1}", "lower training.eval_envs, e.g. to 1/16 of training.num_envs")


def _check_buffer(cfg: Config) -> None:
    a, t = cfg.algo, cfg.training
    if a.buffer_size < 2 * t.env_steps_per_sync:
        # the ring holds the ticks the collector is writing this iteration plus a readable window
        raise ConfigError("algo.buffer_size", a.buffer_size,
                          f"must hold at least 2 * training.env_steps_per_sync = {2 * t.env_steps_per_sync} ticks",
                          f">= {2 * t.env_steps_per_sync}",
                          "raise algo.buffer_size or lower training.env_steps_per_sync")


def _check_buffer_holds_a_batch(cfg: Config) -> None:
    """A minibatch larger than the whole ring would draw the same transitions over and over: the user
    meant a larger ring (buffer_size counts ticks per env, not transitions) or a smaller batch."""
    a, t = cfg.algo, cfg.training
    capacity = a.buffer_size * t.num_envs
    if capacity < a.batch_size:
        need = -(-a.batch_size // t.num_envs)
        raise ConfigError("algo.buffer_size", a.buffer_size,
                          f"the ring holds algo.buffer_size * training.num_envs = {capacity} transitions, fewer than "
                          f"one minibatch (algo.batch_size={a.batch_size})",
                          f">= algo.batch_size / training.num_envs = {need} ticks",
                          f"set algo.buffer_size={need} or more, or lower algo.batch_size to {capacity} or less")


def _check_stall_bounds(cfg: Config) -> None:
    t = cfg.training
    if t.stall_compile_timeout_s < t.stall_timeout_s:
        # compiling, capturing and checkpoints legitimately take longer than a steady-state iteration
        raise ConfigError("training.stall_compile_timeout_s", t.stall_compile_timeout_s,
                          f"must be at least training.stall_timeout_s={t.stall_timeout_s:g} (the long phases' bound)",
                          f">= {t.stall_timeout_s:g}",
                          f"set training.stall_compile_timeout_s={max(900.0, t.stall_timeout_s):g} or lower training.stall_timeout_s")


def _check_resume(cfg: Config) -> None:
    # training.cuda_process_sharing=mps: its host prerequisites are probed by duorl.mps.probe in train(),
    # still before anything is built
    if cfg.training.resume is not None:
        _check_resume_path(cfg.training.resume)


# Rules between keys: (check, the keys it reads, its own included); each runs after those keys passed their
# own Setting check (a cross-key message about a value that is already wrong would be noise)
_CROSS_CHECKS: tuple[tuple[Any, tuple[str, ...]], ...] = (
    (_check_support, ("algo.v_min", "algo.v_max")),
    (_check_log_std, ("algo.log_std_min", "algo.log_std_max")),
    (_check_eval_envs, ("training.eval_envs", "training.num_envs")),
    (_check_buffer, ("algo.buffer_size", "training.env_steps_per_sync")),
    (_check_buffer_holds_a_batch, ("algo.buffer_size", "algo.batch_size", "training.num_envs")),
    (_check_stall_bounds, ("training.stall_timeout_s", "training.stall_compile_timeout_s")),
    (_check_resume, ("training.resume",)),
)


def check_data_parallel_keys(cfg: Config, data_parallel: bool) -> None:
    """A run that is not data parallel reads none of the data-parallel keys: one set away from its default
    would be ignored silently, so it is refused (the user meant a data-parallel run, or copied its
    settings). `data_parallel`: config.switches.data_parallel_enabled for this process."""
    if data_parallel:
        return
    for key in data_parallel_only():
        value = _get(cfg, key)
        if value != default_of(key):
            raise ConfigError(key, value, "is read only by data-parallel runs, and this run is on one device "
                              "without training.data_parallel=true", f"{format_value(default_of(key))} (the default) "
                              "on one device", "remove the key, or run data parallel: several entries in "
                              "training.devices, or training.data_parallel=true for world size 1")


def _check_devices(cfg: Config, probe: bool = True) -> None:
    devices = cfg.training.devices
    key = "training.devices"
    dp = cfg.training.data_parallel
    if devices is None:  # automatic; resolve_device cannot fail on it
        return
    if not isinstance(devices, (list, tuple)) or len(devices) == 0:
        raise ConfigError(key, devices, "must be null or a non-empty list of devices", DEVICES_ALLOWED,
                          f"remove the key (automatic) or set {key}=[cpu]")
    for entry in devices:
        if entry_kind(entry) is None:
            raise ConfigError(key, devices, f"{entry!r} is not a device", DEVICES_ALLOWED,
                              f"e.g. {key}=[0] or {key}=[cpu]")
    kinds = {"cpu" if entry_kind(e) == "cpu" else "cuda" for e in devices}
    if len(kinds) > 1:
        raise ConfigError(key, devices, "mixes the CPU and GPUs (every rank must use the same kind of device)",
                          "all entries CPU, or all GPUs", f"e.g. {key}=[0,1] or {key}=[cpu,cpu]")
    gpus = [str(e).removeprefix("cuda:") for e in devices if entry_kind(e) != "cpu"]
    if len(set(gpus)) < len(gpus):
        raise ConfigError(key, devices, "names one GPU twice (one duo per GPU)", "distinct GPUs",
                          "list each GPU once")
    if len(devices) > 1 and dp is False:
        raise ConfigError("training.data_parallel", False, f"{key} lists {len(devices)} devices, which is data "
                          "parallel", "null or true with several devices",
                          f"remove training.data_parallel, or train on one device, e.g. {key}=[{devices[0]}]")
    if not probe:
        return
    # mujoco with a CUDA entry is allowed: the learner uses the GPU, physics stays on CPU threads;
    # mjwarp with [cpu] is allowed too (warp's CPU device).
    if os.environ.get(RANK_DEVICE_ENV):
        return  # a rank narrowed to its own entry (distributed.launch): that device is this process's
    for entry in devices:
        resolve_entry(cfg, entry)


def validate(cfg: Config, task: TaskFacts, probe_devices: bool = True) -> Config:
    """Raise ConfigError naming every bad key (ConfigErrors when there are several); return cfg
    unchanged when it may run. `task`: the facts of cfg.task.name's task (config/tasks.py).
    `probe_devices` False checks the device list's shape only (no CUDA query: a rank before it narrows
    its devices)."""
    p = _Problems()
    _check_settings(cfg, p)
    _check_task_facts(cfg, task, p)
    for check, needs in _CROSS_CHECKS:
        p.check(check, cfg, needs=needs)
    p.check(_check_devices, cfg, probe_devices, needs=("training.data_parallel",))
    _check_task_keys(cfg, task, p)
    # these resolve the devices and the sim's device: only meaningful once names and devices are good
    if probe_devices and not p.bad("algo.name", "sim.name", "task.name", "training.devices", "training.data_parallel"):
        p.check(_check_graph, cfg)
        for check in (_check_learner_compile, _check_tick_graph, _check_tick_compile, _check_solver_early_exit,
                      _check_reset_graphs):
            p.check(check, cfg)
    p.raise_any()
    return cfg


def _check_graph(cfg: Config) -> None:
    """algo.algo_params.whole_cycle_cuda_graph: null = automatic, true = required, false = eager."""
    key = "algo.algo_params.whole_cycle_cuda_graph"
    v = cfg.algo.algo_params.whole_cycle_cuda_graph
    allowed = "null (automatic: on with CUDA), true (required), false (eager)"
    if v is not True:
        return
    if cfg.debug.check_replay_window:
        raise ConfigError(key, True, "cannot be combined with debug.check_replay_window=true (its per-batch "
                          "host reads cannot be captured)", allowed,
                          f"set debug.check_replay_window=false, or {key}=null to check the window eagerly")
    if resolve_device(cfg) == "cpu":
        raise ConfigError(key, True, "needs a CUDA device: CUDA graphs do not exist on the CPU, and this run's "
                          "learner resolves to cpu", allowed,
                          f"remove the key (automatic) or set {key}=false; or train on a GPU, e.g. "
                          "training.devices=[0]")


def _check_learner_compile(cfg: Config) -> None:
    """algo.algo_params.torch_compile: null = on with CUDA, true = required (a CUDA learner), false = off; the
    same rule as the CUDA graph switches (true where it cannot be is refused, not turned off in silence)."""
    key = "algo.algo_params.torch_compile"
    if cfg.algo.algo_params.torch_compile is True and resolve_device(cfg) == "cpu":
        raise ConfigError(key, True, "compiles only a CUDA learner (the CPU learner runs eagerly), and this run's "
                          "learner resolves to cpu", "null (automatic: on with CUDA), true (required), false (off)",
                          f"remove the key (automatic) or set {key}=false; or train on a GPU, e.g. training.devices=[0]")


def _check_cuda_env_switch(cfg: Config, key: str, value: object, allowed: str, off: str = "") -> None:
    """A sim switch that is null (automatic), true (needs the envs on CUDA) or false. `off`: how to turn
    it off in the fix (default: remove the key for automatic, or set it to false)."""
    off = off or f"remove the key (automatic) or set {key}=false"
    if value is True and env_device_type(cfg) != "cuda":
        device = resolve_device(cfg)
        # name only what is missing: an mjlab task already steps on MuJoCo Warp, and needs only the GPU
        needs = ([] if cfg.sim.name == "mjwarp" else ["--sim mjwarp"]) + (
            ["training.devices=[0] on a GPU machine"] if str(device).startswith("cpu") else [])
        raise ConfigError(key, True, f"needs the envs on a CUDA device, and this run's envs run on the cpu "
                          f"(sim.name={cfg.sim.name}, devices resolve to {device})", allowed,
                          f"{off}; or put the envs on a GPU: {' and '.join(needs)}")


def _check_tick_graph(cfg: Config) -> None:
    """sim.tick_cuda_graph: null = automatic, true = required (CUDA envs), false = eager ticks."""
    _check_cuda_env_switch(cfg, "sim.tick_cuda_graph", cfg.sim.tick_cuda_graph,
                           "null (automatic: on when the envs run on CUDA), true (required), false (eager)")


def _check_tick_compile(cfg: Config) -> None:
    """sim.tick_compile: null = with the tick graph, true = on (CUDA envs), false = off."""
    _check_cuda_env_switch(cfg, "sim.tick_compile", cfg.sim.tick_compile,
                           "null (automatic: on with the tick graph), true (compile), false (plain eager tensor code)")


def _check_reset_graphs(cfg: Config) -> None:
    """sim.mjlab_reset_graphs: null/false = the reset body eager, true = captured per count (CUDA envs)."""
    _check_cuda_env_switch(cfg, "sim.mjlab_reset_graphs", cfg.sim.mjlab_reset_graphs,
                           "null or false (the reset body eager) or true (captured per number of done envs, on "
                           "CUDA envs)", off="remove sim.mjlab_reset_graphs or set it to false")


def _check_solver_early_exit(cfg: Config) -> None:
    """sim.solver_early_exit: false (the default) = fixed iterations, true = on (needs the tick graph)."""
    key, value = "sim.solver_early_exit", cfg.sim.solver_early_exit
    allowed = "false (the default: the solver's fixed iterations) or true (inside the captured tick)"
    _check_cuda_env_switch(cfg, key, value, allowed, off=f"set {key}=false or remove the key")
    if value and cfg.sim.tick_cuda_graph is False:
        raise ConfigError(key, True, "exits the solver loop early only inside a captured tick, and "
                          "sim.tick_cuda_graph=false runs ticks eagerly (an eager early exit would sync with the "
                          "host every solver iteration)", allowed,
                          f"set {key}=false, or remove sim.tick_cuda_graph (on for CUDA envs)")


def env_device_type(cfg: Config) -> str:
    """'cuda' or 'cpu': where this run's envs step (config.switches.env_device)."""
    from duorl.config.switches import env_device

    return env_device(cfg, resolve_device(cfg)).split(":")[0]


def _check_resume_path(resume: str) -> None:
    """The checkpoint must exist now; its compatibility is checked when it is loaded (cli/train_steps/resume.py)."""
    from pathlib import Path

    p = Path(resume)
    if p.is_file():
        return
    if (p / "checkpoints" / "latest.json").is_file() or (p / "latest.json").is_file():
        return
    raise ConfigError(
        "training.resume", resume, "no checkpoint found there",
        "a run directory (with checkpoints/latest.json) or a checkpoint file (.pt)",
        "point training.resume at a run directory of an earlier run or one of its checkpoints/*.pt",
    )
