"""Range and consistency checks on a merged Config, run before anything is built (fail closed).

Each failure is a ConfigError naming the dotted key, its value, what is allowed and the fix. Every
bad key is reported at once (ConfigErrors, one line): each check below judges one key, and a check
that reads several keys runs only when those keys passed their own checks (a cross-key message about
a value that is already wrong would be noise). Checks run cheapest first (names, then ranges, then
devices, which may import torch to probe CUDA); the device-dependent switches run only once the
names and devices are good.
"""

from __future__ import annotations

import math
import os
from typing import Any

from duorl.config.catalog import available_tasks
from duorl.config.devices import ALLOWED as DEVICES_ALLOWED
from duorl.config.devices import RANK_DEVICE_ENV, entry_kind, resolve_device, resolve_entry
from duorl.config.errors import ConfigError, ConfigErrors
from duorl.config.schema import ACTION_RANGES, ALGOS, PENALTY_CURRICULA, SIMS, Config

__all__ = ["validate", "resolve_device", "BUILT_ALGOS"]

# Algorithms with a learner today (every name in schema.ALGOS).
BUILT_ALGOS = ("sac", "flashsac", "warpsac")
WIRE_DTYPES = ("float32", "bfloat16")

# (key, minimum) for integers.
_INT_MIN: tuple[tuple[str, int], ...] = (
    ("training.num_envs", 1),
    ("training.eval_envs", 0),
    ("training.seed", 0),
    ("training.env_steps_per_sync", 1),
    ("training.log_interval", 1),
    ("training.torch_threads", 0),
    ("algo.max_iterations", 1),
    ("algo.save_interval", 1),
    ("algo.batch_size", 1),
    ("algo.updates_per_step", 1),  # 0 would "complete" a run that never learned
    ("algo.policy_frequency", 1),
    ("algo.learning_starts", 0),
    ("algo.buffer_size", 1),
    ("algo.num_atoms", 2),
    ("algo.actor_hidden_dim", 1),
    ("algo.actor_num_blocks", 0),
    ("algo.critic_hidden_dim", 1),
    ("algo.critic_num_blocks", 0),
    ("algo.block_expansion", 1),
    ("algo.noise_zeta_max", 1),
    ("algo.lr_warmup_updates", 0),
    ("algo.lr_decay_updates", 0),
    ("algo.decay_step", 0),
    ("algo.replay_num_buckets", 1),
    ("sim.nthread", 0),
    ("debug.nan_inject_step", -1),  # -1 = never
    ("debug.nan_loss_iteration", -1),  # -1 = never
    ("debug.nan_loss_rank", 0),
    ("debug.fail_capture_rank", -1),
)
# (key, lower bound, lower inclusive?) for floats; every float must also be finite.
_FLOAT_MIN: tuple[tuple[str, float, bool], ...] = (
    ("algo.actor_lr", 0.0, False),
    ("algo.critic_lr", 0.0, False),
    ("algo.alpha_lr", 0.0, False),
    ("algo.alpha_init", 0.0, False),  # the temperature is learned as log(alpha)
    ("algo.weight_decay", 0.0, True),
    ("algo.max_grad_norm", 0.0, True),  # 0 = no clipping
    ("algo.normalized_return_max", 0.0, False),
    ("algo.target_entropy_std", 0.0, False),
    ("algo.noise_zeta_mu", 0.0, True),  # 0 = hold lengths uniform on [1, noise_zeta_max]
    ("algo.lr_end_ratio", 0.0, True),
    ("algo.replay_min_weight", 0.0, False),  # > 0: every readable tick stays reachable
    ("training.dp_timeout_s", 0.0, False),
    ("training.dp_startup_timeout_s", 0.0, False),
    ("debug.collector_delay_ms", 0.0, True),
    ("debug.learner_delay_ms", 0.0, True),
    ("training.stall_timeout_s", 0.0, False),
    ("training.stall_compile_timeout_s", 0.0, False),
    ("training.wait_report_s", 0.0, False),
    ("debug.slow_phase_s", 0.0, True),
)
_FLOATS_ANY = ("algo.target_entropy_scale", "algo.v_min", "algo.v_max", "algo.log_std_min", "algo.log_std_max")
_BOOLS = (
    "training.no_play", "training.export_onnx", "training.nan_guard.enabled", "training.checkpoint_replay",
    "training.progress", "algo.obs_normalization", "algo.use_autocast", "algo.use_symmetry", "algo.normalize_reward",
    "algo.algo_params.dp_whole_cycle_cuda_graph", "debug.check_replay_window",
)
_SEED_MAX = 2**32 - 1  # numpy's seed range; ranks use seed + rank
# tasks that read a reference clip (task.motion_file)
CLIP_TASKS = ("g1_motion_tracking",)
SLOW_PHASE_SIDES = ("learner", "collector")


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


def _check_int(cfg: Config, key: str, minimum: int) -> None:
    v = _get(cfg, key)
    if not _is_int(v):
        raise ConfigError(key, v, "not an integer", f"integers >= {minimum}", f"set {key} to an integer")
    if v < minimum:
        raise ConfigError(key, v, f"must be >= {minimum}", f"integers >= {minimum}", f"set {key}={minimum} or more")


def _float(cfg: Config, key: str) -> float:
    v = _get(cfg, key)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ConfigError(key, v, "not a number", "finite floats", f"set {key} to a number")
    if not math.isfinite(v):
        raise ConfigError(key, v, "not finite", "finite floats", f"set {key} to a finite number")
    return float(v)


def _not_built(key: str, value: Any, what: str, allowed: str, fix: str) -> ConfigError:
    return ConfigError(key, value, f"{what} is not built yet", allowed, fix)


def _check_algo_name(cfg: Config) -> None:
    algo = cfg.algo.name
    if algo not in ALGOS:
        raise ConfigError("algo.name", algo, "unknown algorithm", ", ".join(ALGOS), "pick one with --algo, e.g. --algo sac")
    if algo not in BUILT_ALGOS:
        raise _not_built("algo.name", algo, f"the {algo} learner", ", ".join(BUILT_ALGOS),
                         "train with --algo sac (FastSAC-style) for now")


def _check_sim_name(cfg: Config) -> None:
    if cfg.sim.name not in SIMS:
        raise ConfigError("sim.name", cfg.sim.name, "unknown simulator backend", ", ".join(SIMS),
                          "pick one with --sim, e.g. --sim mujoco")


def _check_task_name(cfg: Config) -> None:
    if cfg.task.name.startswith(MJLAB_PREFIX):  # mjlab dispatch (minimal; reconciled with the tasks resolver)
        _check_mjlab_task(cfg)
        return
    tasks = available_tasks()
    if cfg.task.name not in tasks:
        raise ConfigError("task.name", cfg.task.name, "unknown task", ", ".join(tasks) or "(no task registered)",
                          "pick one with --task (see `duorl train --help`)")


MJLAB_PREFIX = "mjlab:"  # duorl.envs.mjlab.PREFIX


def _check_mjlab_task(cfg: Config) -> None:
    """An mjlab task: mjlab installed, the id in its registry, MuJoCo Warp, and no switch that only
    duorl's own tasks have (the tick graph: mjlab's step syncs the host; tick compilation)."""
    import difflib

    from duorl.config.errors import InputRefused
    from duorl.envs import mjlab
    from duorl.envs.mjlab.vec_env import MjlabVecEnv

    name = cfg.task.name
    try:
        mjlab.check_installed()
        ids = mjlab.task_ids()
    except InputRefused as e:
        raise ConfigError("task.name", name, str(e).split(". Fix:")[0], "an installed mjlab", mjlab.INSTALL) from None
    task_id = name[len(MJLAB_PREFIX):]
    if task_id not in ids:
        close = difflib.get_close_matches(task_id, ids, n=3, cutoff=0.5)
        raise ConfigError("task.name", name, "unknown mjlab task id",
                          ", ".join(MJLAB_PREFIX + i for i in (close or ids)),
                          f"did you mean {MJLAB_PREFIX}{close[0]}?" if close else "pick one of mjlab's ids")
    if cfg.sim.name != "mjwarp":
        raise ConfigError("sim.name", cfg.sim.name, f"an mjlab task ({name}) always steps MuJoCo Warp", "mjwarp",
                          "use --sim mjwarp (on a GPU, or Warp's CPU device with training.devices=[cpu])")
    for key, value, why in (
            ("sim.tick_cuda_graph", cfg.sim.tick_cuda_graph, f"{MjlabVecEnv.tick_eager_reason}, so the collector "
             "tick of an mjlab task runs eagerly"),
            ("sim.tick_compile", cfg.sim.tick_compile, "it compiles the tensor code of duorl's own tasks, and an "
             "mjlab task's step is mjlab's")):
        if value is True:
            raise ConfigError(key, True, why, "null or false", f"remove {key}")


def _check_action_range(cfg: Config) -> None:
    if cfg.task.action_range not in ACTION_RANGES:
        raise ConfigError("task.action_range", cfg.task.action_range, "unknown action range", ", ".join(ACTION_RANGES),
                          "set task.action_range=pd (the default) or task.action_range=joint_limits")
    if cfg.task.action_range != "pd" and not cfg.task.name.startswith("g1_"):
        raise ConfigError("task.action_range", cfg.task.action_range, f"only the G1 tasks choose an action range, "
                          f"and this run's task is {cfg.task.name}", "pd",
                          "remove the key (its default pd) or train a G1 task")


def _check_curriculum(cfg: Config) -> None:
    curriculum = cfg.task.penalty_curriculum
    if curriculum is not None and curriculum not in PENALTY_CURRICULA:
        raise ConfigError("task.penalty_curriculum", curriculum, "unknown penalty curriculum",
                          ", ".join(PENALTY_CURRICULA), "set task.penalty_curriculum=ppo (the default), fastsac or off")
    if curriculum is not None and cfg.task.name != "g1_walk_flat":
        raise ConfigError("task.penalty_curriculum", curriculum, f"only g1_walk_flat has a penalty curriculum, "
                          f"and this run's task is {cfg.task.name}", "null",
                          "remove the key or train --task g1_walk_flat")


def _check_motion_file(cfg: Config) -> None:
    """A clip given to a task that reads none would be ignored silently: the user meant another task."""
    clip = cfg.task.motion_file
    if clip is not None and cfg.task.name not in CLIP_TASKS:
        raise ConfigError("task.motion_file", clip, f"only {', '.join(CLIP_TASKS)} reads a reference clip, and "
                          f"this run's task is {cfg.task.name}", "null",
                          f"remove the key, or train --task {CLIP_TASKS[0]} to track this clip")


def _check_names(cfg: Config, p: _Problems) -> None:
    for check in (_check_algo_name, _check_sim_name, _check_task_name):
        p.check(check, cfg)
    for check in (_check_action_range, _check_curriculum, _check_motion_file):
        p.check(check, cfg, needs=("task.name",))


def _check_float_min(cfg: Config, key: str, lo: float, inclusive: bool) -> None:
    v = _float(cfg, key)
    if v < lo or (v == lo and not inclusive):
        bound = f">= {lo:g}" if inclusive else f"> {lo:g}"
        raise ConfigError(key, v, f"must be {bound}", f"floats {bound}", f"set {key} to a value {bound}")


def _check_bool(cfg: Config, key: str) -> None:
    v = _get(cfg, key)
    if not isinstance(v, bool):
        raise ConfigError(key, v, "not a boolean", "true, false", f"set {key}=true or {key}=false")


def _check_seed(cfg: Config) -> None:
    t = cfg.training
    if t.seed > _SEED_MAX:
        raise ConfigError("training.seed", t.seed, "too large (ranks seed numpy with seed + rank)",
                          f"0..{_SEED_MAX}", "pick a smaller seed, e.g. training.seed=1")


def _check_gamma(cfg: Config) -> None:
    gamma = _float(cfg, "algo.gamma")
    if not 0.0 < gamma < 1.0:
        # gamma = 1 makes the bootstrapped return unbounded at time-limit truncations
        raise ConfigError("algo.gamma", gamma, "must lie strictly between 0 and 1", "0 < gamma < 1",
                          "set algo.gamma=0.99 (or 0.97 for short-horizon locomotion)")


def _check_tau(cfg: Config) -> None:
    tau = _float(cfg, "algo.tau")
    if not 0.0 < tau <= 1.0:
        raise ConfigError("algo.tau", tau, "must be in (0, 1]", "0 < tau <= 1 (1 copies the critic)",
                          "set algo.tau=0.005 .. 0.125")


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


def _check_dims(cfg: Config, key: str) -> None:
    dims = _get(cfg, key)
    if not isinstance(dims, (list, tuple)) or not dims or not all(_is_int(d) and d > 0 for d in dims):
        raise ConfigError(key, dims, "must be a non-empty list of positive layer widths",
                          "[int > 0, ...]", f"e.g. {key}=[256,256]")


def _check_episode_steps(cfg: Config) -> None:
    steps = cfg.task.max_episode_steps
    if steps is not None and (not _is_int(steps) or steps < 1):
        raise ConfigError("task.max_episode_steps", steps, "must be a positive integer or null",
                          "null (the task's default) or integers >= 1", "remove the key or set task.max_episode_steps=1000")


def _check_wire_dtype(cfg: Config) -> None:
    t = cfg.training
    if t.dp_gradient_wire_dtype not in WIRE_DTYPES:
        raise ConfigError("training.dp_gradient_wire_dtype", t.dp_gradient_wire_dtype, "unknown wire dtype",
                          ", ".join(WIRE_DTYPES), "set training.dp_gradient_wire_dtype=float32")


def _check_sharing(cfg: Config) -> None:
    t = cfg.training
    if t.cuda_process_sharing not in (None, "mps"):
        raise ConfigError("training.cuda_process_sharing", t.cuda_process_sharing, "unknown sharing mode",
                          "null, mps", "remove the key or set training.cuda_process_sharing=null")


def _check_replay_min_weight(cfg: Config) -> None:
    a = cfg.algo
    if a.replay_min_weight > 1.0:
        raise ConfigError("algo.replay_min_weight", a.replay_min_weight, "must be in (0, 1] (the newest tick weighs 1)",
                          "0 < replay_min_weight <= 1", "e.g. algo.replay_min_weight=0.1")


def _check_stall_bounds(cfg: Config) -> None:
    t = cfg.training
    if t.stall_compile_timeout_s < t.stall_timeout_s:
        # compiling, capturing and checkpoints legitimately take longer than a steady-state iteration
        raise ConfigError("training.stall_compile_timeout_s", t.stall_compile_timeout_s,
                          f"must be at least training.stall_timeout_s={t.stall_timeout_s:g} (the long phases' bound)",
                          f">= {t.stall_timeout_s:g}",
                          f"set training.stall_compile_timeout_s={max(900.0, t.stall_timeout_s):g} or lower training.stall_timeout_s")


def _check_slow_phase(cfg: Config) -> None:
    """debug.slow_phase: 'learner:PHASE' or 'collector:PHASE' (the phase names are checked by preflight,
    which knows the runtime's)."""
    v = cfg.debug.slow_phase
    if v is None:
        return
    side, sep, phase = str(v).partition(":")
    if not isinstance(v, str) or not sep or side not in SLOW_PHASE_SIDES or not phase:
        raise ConfigError("debug.slow_phase", v, "not PROCESS:PHASE", "null, learner:<phase>, collector:<phase>",
                          "e.g. debug.slow_phase='learner:writing a checkpoint', or remove the key")


# (check, the keys it reads besides the one it names); run after every key's own type and range check
_CROSS_CHECKS: tuple[tuple[Any, tuple[str, ...]], ...] = (
    (_check_seed, ("training.seed",)),
    (_check_gamma, ()),
    (_check_tau, ()),
    (_check_support, ("algo.v_min", "algo.v_max")),
    (_check_log_std, ("algo.log_std_min", "algo.log_std_max")),
    (_check_eval_envs, ("training.eval_envs", "training.num_envs")),
    (_check_buffer, ("algo.buffer_size", "training.env_steps_per_sync")),
    (_check_episode_steps, ()),
    (_check_wire_dtype, ()),
    (_check_sharing, ()),
    (_check_replay_min_weight, ("algo.replay_min_weight",)),
    (_check_stall_bounds, ("training.stall_timeout_s", "training.stall_compile_timeout_s")),
    (_check_slow_phase, ()),
)


def _check_ranges(cfg: Config, p: _Problems) -> None:
    for key, minimum in _INT_MIN:
        p.check(_check_int, cfg, key, minimum)
    for key, lo, inclusive in _FLOAT_MIN:
        p.check(_check_float_min, cfg, key, lo, inclusive)
    for key in _FLOATS_ANY:
        p.check(_float, cfg, key)
    for key in _BOOLS:
        p.check(_check_bool, cfg, key)
    for key in ("algo.actor_hidden_dims", "algo.critic_hidden_dims"):
        p.check(_check_dims, cfg, key)
    for check, needs in _CROSS_CHECKS:
        p.check(check, cfg, needs=needs)


def _check_not_built(cfg: Config) -> None:
    t = cfg.training
    # training.cuda_process_sharing=mps: its host prerequisites are probed by duorl.mps.probe in train(),
    # still before anything is built
    if t.resume is not None:
        _check_resume_path(t.resume)


def _check_devices(cfg: Config, probe: bool = True) -> None:
    devices = cfg.training.devices
    key = "training.devices"
    dp = cfg.training.data_parallel
    if dp is not None and not isinstance(dp, bool):
        raise ConfigError("training.data_parallel", dp, "not a boolean or null",
                          "null (automatic: on with several devices), true, false",
                          "remove the key or set training.data_parallel=true")
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


def validate(cfg: Config, probe_devices: bool = True) -> Config:
    """Raise ConfigError naming every bad key (ConfigErrors when there are several); return cfg
    unchanged when it may run. `probe_devices` False checks the device list's shape only (no CUDA
    query: a rank before it narrows its devices)."""
    p = _Problems()
    _check_names(cfg, p)
    _check_ranges(cfg, p)
    p.check(_check_not_built, cfg)
    p.check(_check_devices, cfg, probe_devices)
    # these resolve the devices and the sim's device: only meaningful once names and devices are good
    if probe_devices and not p.bad("algo.name", "sim.name", "task.name", "training.devices", "training.data_parallel"):
        p.check(_check_graph, cfg)
        for check in (_check_tick_graph, _check_tick_compile, _check_solver_early_exit):
            p.check(check, cfg)
    if probe_devices:
        p.check(_check_wall_minutes, cfg)
    p.raise_any()
    return cfg


def _check_graph(cfg: Config) -> None:
    """algo.algo_params.whole_cycle_cuda_graph: null = automatic, true = required, false = eager."""
    v = cfg.algo.algo_params.torch_compile
    if v is not None and not isinstance(v, bool):
        raise ConfigError("algo.algo_params.torch_compile", v, "not a boolean or null",
                          "null (automatic: on for CUDA learners), true, false",
                          "remove the key or set algo.algo_params.torch_compile=false")
    key = "algo.algo_params.whole_cycle_cuda_graph"
    v = cfg.algo.algo_params.whole_cycle_cuda_graph
    allowed = "null (automatic: on with CUDA), true (required), false (eager)"
    if v is not None and not isinstance(v, bool):
        raise ConfigError(key, v, "not a boolean or null", allowed, f"remove the key or set {key}=false")
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


def _check_cuda_env_switch(cfg: Config, key: str, value: object, allowed: str, off: str = "") -> None:
    """A sim switch that is null (automatic), true (needs the envs on CUDA) or false. `off`: how to turn
    it off in the fix (default: remove the key for automatic, or set it to false)."""
    off = off or f"remove the key (automatic) or set {key}=false"
    if value is not None and not isinstance(value, bool):
        raise ConfigError(key, value, "not a boolean or null", allowed, f"remove the key or set {key}=false")
    if value is True and env_device_type(cfg) != "cuda":
        raise ConfigError(key, True, f"needs the envs on a CUDA device, and this run's envs run on the cpu "
                          f"(sim.name={cfg.sim.name}, devices resolve to {resolve_device(cfg)})", allowed,
                          f"{off}; or use --sim mjwarp on a GPU")


def _check_tick_graph(cfg: Config) -> None:
    """sim.tick_cuda_graph: null = automatic, true = required (CUDA envs), false = eager ticks."""
    _check_cuda_env_switch(cfg, "sim.tick_cuda_graph", cfg.sim.tick_cuda_graph,
                           "null (automatic: on when the envs run on CUDA), true (required), false (eager)")


def _check_tick_compile(cfg: Config) -> None:
    """sim.tick_compile: null = with the tick graph, true = on (CUDA envs), false = off."""
    _check_cuda_env_switch(cfg, "sim.tick_compile", cfg.sim.tick_compile,
                           "null (automatic: on with the tick graph), true (compile), false (plain eager tensor code)")


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


def _check_wall_minutes(cfg: Config) -> None:
    key, v = "training.max_wall_minutes", cfg.training.max_wall_minutes
    if v is None:
        return
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
        raise ConfigError(key, v, "not a positive number of minutes", "null (no limit) or a number > 0, e.g. 15",
                          f"set {key}=15, or remove the key to run algo.max_iterations")


def env_device_type(cfg: Config) -> str:
    """'cuda' or 'cpu': where this run's envs step (config.switches.env_device)."""
    from duorl.config.switches import env_device

    return env_device(cfg, resolve_device(cfg)).split(":")[0]


def _check_resume_path(resume: str) -> None:
    """The checkpoint must exist now; its compatibility is checked when it is loaded (train.py)."""
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
