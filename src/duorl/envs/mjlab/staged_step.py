"""The staged mjlab step (sim.mjlab_staged_step): mjlab 1.6's ManagerBasedRlEnv.step and duorl's reset of
the done envs, cut into stages, whose host-sync-free stretches are replayed as CUDA graphs.

mjlab's own step reads the device on the host about a dozen times a tick (which envs are done, which
interval events fire, which commands resample, index lists in the velocity command and the ray-cast
sensor), so it cannot be one graph, and eagerly it launches some 900 small ops a tick from Python. Here the
same ops run in the same order from the same random streams, in these stages (per tick):

  physics      [graph] process_action, the decimation loop (apply_action, write_data_to_sim, sim.step,
               scene.update, metrics substeps), episode_length_buf += 1, terminations, rewards, metrics
  events.step  [eager] step-mode events, if the task has any
  flags        [graph] interval timers -= dt and which fired; which commands resample (time_left - dt <= 0,
               computed before mjlab does, from the same values; checked against mjlab's own mask later);
               which envs are done: one [rows, N] mask
  (host read)  the one read every tick needs: the mask above, copied to the host
  events.interval [eager] the fired interval events, as mjlab's EventManager.apply fires them
  commands     [graph] sim.forward, each command's metrics and timer; [eager] its resampling, for the envs
               the mask named; [graph] its command update (graph_safe.py: mask-based)
  observe      [graph] sim.sense, the observation groups, duorl's wrapper (MjlabVecEnv.after_step:
               concatenation, Task/ rows, finiteness check, episode sums)
  reset        [eager] the curriculum (Python values) for the done envs, then
  reset.k<n>   [graph, one per number n of done envs: the draws are sized by it; on CUDA only when asked,
               RESET_GRAPHS_BY_MODE; else eager, mjlab's own _reset_idx] the rest of mjlab's
               _reset_idx (sim and scene reset, reset events, the managers' resets: graph_safe.py's where
               mjlab's read their logs to the host), then the curriculum's logs, eagerly
  reset.tail   [graph] write_data_to_sim, sim.forward, the commands' dt=0 update, sense, the observation
               groups, and the fresh observation selected for the reset envs

On the CPU (and with `graphs="none"`) every stage runs eagerly: the same code, so the CPU tests compare it
with mjlab's own step bit for bit; `graphs="cpu-replay"` replays the graph stages as stage_graphs.py's
CpuReplayGraph does (a CPU stand-in for the CUDA graphs, for the same tests). On CUDA a graph stage runs
eagerly once (on the capture stream), is captured on its second run and replayed after that; the eager
stages there make mjlab's Python scalar writes on the device (SCALAR_WRITES). A stage that
cannot be captured (its terms read the device on the host, or keep Python state: observation history or
delay, noise models, custom command classes) stays eager; `describe()` lists which and why.

What differs from mjlab's own step, on purpose: the check that every done env was reset before the next
step (duorl always resets them), the dt=0 timer update of reset envs (x - 0 is x), and, only when an env's
state turns non-finite without its episode ending, that env's reset runs as a second _reset_idx after the
done envs' (mjlab's reset would take both at once: the same envs reset, from other random draws).
Python values a graph stage reads are read when it is captured: a curriculum that changes them (a reward
weight, a command range read inside a graph stage) invalidates the graphs (`fingerprint`), which are then
captured again. mjlab's reset logs (extras["log"], MjlabVecEnv.last_log) hold device tensors where mjlab's
hold floats.
"""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
import torch

from duorl.envs.mjlab.stage_graphs import (
    CaptureGuard,
    CpuReplayGraph,
    CudaStageGraph,
    RebindWatch,
    StageCaptureError,
    run_eagerly_on,
    scalar_writes_from_the_device,
)

if TYPE_CHECKING:  # the contract, not MjlabVecEnv: vec_env imports this module
    from duorl.envs.base import VecEnv

MJLAB_VERSION = "1.6.0"  # the ManagerBasedRlEnv.step this module re-sequences
MAX_RESET_GRAPHS = 64  # reset-body graphs kept (one per number of done envs)
# A reset body's graph replays only when its number of done envs comes back. Measured on an H200 at 4096
# G1 velocity envs (benchmarks/2026-12-03_mjlab_reset_graphs_h200/): 1 of 78 counts came back within 40
# ticks, the first run of each under the capture guard, and the staged tick took 1.04x mjlab's own; with
# the body eager 0.86x. Training with the body eager: G1 1.42x, Go1 1.22x mjlab's own step (benchmarks/
# 2026-12-03_mjlab_staged_ab_h200/). So on CUDA the body is eager unless asked for (sim.mjlab_reset_graphs).
RESET_GRAPHS_BY_MODE = {"cuda": False, "cpu-replay": True, "none": False}
GRAPH_MODES = ("none", "cuda", "cpu-replay")
# mjlab writes Python scalars into index sets about twenty times a reset (`buf[env_ids] = 0.0`, a reward
# term's episode sum among them): on CUDA torch copies each from the host and waits for the stream first
# (the H200 profile's sync warnings, benchmarks/2026-12-03_mjlab_staged_ab_h200/). The eager stages on
# CUDA make them on the device instead (stage_graphs.scalar_writes_from_the_device: the same values).
# DUORL_MJLAB_SCALAR_WRITES=host keeps torch's own copies: the other arm of the measurement
# (benchmarks/scripts/mjlab_tick_h200.sh).
SCALAR_WRITES = os.environ.get("DUORL_MJLAB_SCALAR_WRITES", "device")
SCALAR_WRITE_MODES = ("device", "host")


class StagedStepUnsupported(RuntimeError):
    """The task uses a part of mjlab the staged step does not re-sequence; the message names it."""


def unsupported_reason(env: Any) -> str | None:
    """Why the staged step cannot stand in for `env`'s own step (None: it can)."""
    import mjlab
    from mjlab.envs import ManagerBasedRlEnv
    from mjlab.managers.recorder_manager import NullRecorderManager

    version = getattr(mjlab, "__version__", None) or _dist_version("mjlab")
    if version != MJLAB_VERSION:
        return f"it re-sequences mjlab {MJLAB_VERSION}'s step and mjlab {version} is installed"
    if type(env) is not ManagerBasedRlEnv:
        return f"the task's env is a {type(env).__name__}, which may step differently from ManagerBasedRlEnv"
    if env.cfg.auto_reset:
        return "the env resets its done envs itself (auto_reset)"
    if not isinstance(env.recorder_manager, NullRecorderManager):
        return "the task records its steps (recorders)"
    if env.sim.nan_guard.enabled:
        return "mjlab's NaN guard is on (it copies states on the host every physics step)"
    return None


def _dist_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


@dataclass
class _Stage:
    """One stage: its parts in order; `capturable`: replayed as a graph (else always eager)."""

    name: str
    parts: list[Callable[[], None]]
    capturable: bool
    why_eager: str | None = None
    runs: int = 0
    graph: Any = None
    keep_watching: bool = False
    logs: dict[str, Any] = field(default_factory=dict)  # extras["log"] entries the graph refreshes

    def run_parts(self) -> None:
        for part in self.parts:
            part()


class StagedStep:
    """The staged step of one MjlabVecEnv; see the module docstring. `graphs`: "cuda" (CUDA envs only),
    "cpu-replay" (CPU envs, tests) or "none" (every stage eager)."""

    def __init__(self, vec: VecEnv, graphs: str, reset_graphs: bool | None = None) -> None:
        if graphs not in GRAPH_MODES:
            raise ValueError(f"graphs={graphs!r}: one of {GRAPH_MODES}")
        if SCALAR_WRITES not in SCALAR_WRITE_MODES:
            raise ValueError(f"DUORL_MJLAB_SCALAR_WRITES={SCALAR_WRITES!r}: one of {SCALAR_WRITE_MODES}; unset it "
                             "for the default (device)")
        env = vec.env
        why = unsupported_reason(env)
        if why is not None:
            raise StagedStepUnsupported(why)
        self.vec, self.env = vec, env
        self.device = torch.device(env.device)
        if graphs == "cuda" and self.device.type != "cuda":
            raise ValueError(f"graphs='cuda' needs CUDA envs, these step on {self.device}")
        if graphs == "cpu-replay" and self.device.type != "cpu":
            raise ValueError(f"graphs='cpu-replay' needs CPU envs, these step on {self.device}")
        self.graphs = graphs
        self.reset_graphs = RESET_GRAPHS_BY_MODE[graphs] if reset_graphs is None else reset_graphs
        self.notes: list[str] = []
        from duorl.envs.mjlab.graph_safe import install

        self.replacements = install(env)
        n, dev = env.num_envs, self.device
        self.step_dt = float(env.step_dt)
        self._action_in = torch.zeros(n, env.action_manager.total_action_dim, device=dev)
        em = env.event_manager
        self._interval_cfgs = list(em._mode_term_cfgs.get("interval", [])) if "interval" in em.available_modes else []
        self._commands = list((getattr(env.command_manager, "_terms", {}) or {}).items())
        # host-read rows: done, one per interval term, one per command term, and the command-mask check
        self._rows = 1 + len(self._interval_cfgs) + len(self._commands) + 1
        self._flags = torch.zeros(self._rows, n, dtype=torch.bool, device=dev)
        self._check_row = self._rows - 1
        cuda = dev.type == "cuda"
        self._flags_host = torch.zeros(self._rows, n, dtype=torch.bool, pin_memory=cuda)
        self._bad_host = torch.zeros(n, dtype=torch.bool, pin_memory=cuda)
        self._event = torch.cuda.Event() if cuda else None
        self._reset_mask = torch.zeros(n, dtype=torch.bool, device=dev)
        self._stream = torch.cuda.Stream(dev) if graphs == "cuda" else None
        self._solver_loop = self._joined_solver_loop() if graphs == "cuda" else None
        self._host_ids: dict[str, np.ndarray] = {}
        self._dev_ids: dict[str, torch.Tensor] = {}
        self._out: Any = None  # the observe stage's StepOutcome (graph tensors once captured)
        self._obs_out: dict[str, torch.Tensor] = {}
        self._final_out: dict[str, torch.Tensor] = {}
        self._bad = torch.zeros(n, dtype=torch.bool, device=dev)
        self._nan = torch.zeros((), dtype=torch.int64, device=dev)
        self._reset_ids_now: torch.Tensor | None = None
        self._index_cache: dict[Any, torch.Tensor] = {}  # device stand-ins of mjlab's id lists (CaptureGuard)
        self._curricula = bool(getattr(env.curriculum_manager, "active_terms", None))
        self._step_count = torch.zeros((), dtype=torch.int64, device=dev)  # the reset events' step count
        self._ids_buffers: dict[int, torch.Tensor] = {}  # the done envs' ids, one buffer per count
        self._reset_lru: dict[int, None] = {}
        self._fingerprint: str | None = None
        self.captures = 0
        self.invalidations = 0
        # envs named by the host read so far: done, interval (events fired), command (resampled)
        self.counts: dict[str, int] = {}
        # stage runs so far, replayed graphs and eager runs; capture_enabled=False: no new captures
        # (a benchmark's measured ticks), stages without a graph run eagerly
        self.stage_runs = {"graph": 0, "eager": 0}
        self.capture_enabled = True
        self._stages = self._plan()
        self._reset_why = self._reset_eager_reason()

    def _joined_solver_loop(self) -> Any:
        """The solver's early exit inside the graphs, as a while-node (mjlab's own graphs stop the solver once
        every world has converged too); None where the driver lacks conditional nodes: the fixed loop, whose
        converged worlds skip the remaining iterations inside the kernels."""
        import warp as wp

        from duorl.envs.backends.warp_conditional import JoinedSolverLoop

        try:
            return JoinedSolverLoop(wp, self.env.sim.wp_device)
        except RuntimeError as e:
            self._note(f"the solver runs its fixed {self.env.sim.wp_model.opt.iterations} iterations in the graphs: {e}")
            return None

    # ------------------------------------------------------------------------------------------ plan

    def _plan(self) -> dict[str, _Stage]:
        env = self.env
        obs_why = self._observations_eager_reason()
        stages: dict[str, _Stage] = {}

        def add(name: str, parts: list[Callable[[], None]], capturable: bool, why: str | None = None) -> None:
            if not parts:
                return
            if capturable and self.graphs == "none":
                capturable, why = False, "graphs='none': every stage runs eagerly"
            stages[name] = _Stage(name, parts, capturable, why)

        add("physics", [self._physics], True)
        if "step" in env.event_manager.available_modes:
            add("events.step", [lambda: env.event_manager.apply(mode="step", dt=self.step_dt)], False,
                "step-mode events are the task's own functions")
        add("flags", [self._compute_flags], True)
        add("events.interval", [self._fire_interval_events], False, "fires for the envs the host read named")
        # the command stages: sim.forward, then per command its metrics and timer, its resampling, its update
        pending: list[Callable[[], None]] = [env.sim.forward]
        for j, (name, term) in enumerate(self._commands):
            if self._decomposable(term):
                add(f"commands.{j}.pre", pending + [lambda t=term, j=j: self._command_pre(t, j)], True)
                add(f"commands.{j}.resample", [lambda t=term, j=j: self._command_resample(t, j)], False,
                    "draws for the envs the host read named")
                pending = [lambda t=term: t._update_command(None)]
            else:
                add(f"commands.{j}.pre", pending, True)
                add(f"commands.{j}.compute", [lambda t=term: t.compute(self.step_dt)], False,
                    f"{type(term).__name__} is not a command class the staged step knows")
                pending = []
        observe = pending + [env.sim.sense]
        if obs_why is None:
            add("observe", observe + [self._observe, self._wrap], True)
        else:
            add("observe.sense", observe, True)
            add("observe.observations", [self._observe], False, obs_why)
            add("observe.wrap", [self._wrap], True)
        # the stages of every tick in their order: up to the host read, then after it
        names = list(stages)
        self._before_read = names[:names.index("flags") + 1]
        self._after_read = names[names.index("flags") + 1:]
        add("reset", [self._reset_done], False, "mjlab's curriculum runs on Python values; the reset body is "
            "a graph per number of done envs (reset.k<n>) where it can be")
        tail_why = obs_why or self._tail_eager_reason()
        if tail_why is None:
            add("reset.tail", [env.scene.write_data_to_sim, env.sim.forward, self._tail_commands, env.sim.sense,
                               self._tail_observe, self._tail_select], True)
        else:
            add("reset.tail", [self._tail_eager, self._tail_select], False, tail_why)
        return stages

    def _observations_eager_reason(self) -> str | None:
        from mjlab.utils.noise import noise_cfg

        om = self.env.observation_manager
        for group, cfgs in om._group_obs_term_cfgs.items():
            gcfg = om.cfg[group]
            if gcfg.nan_policy != "disabled":
                return f"observation group '{group}' checks for NaN on the host (nan_policy={gcfg.nan_policy})"
            for name, term in zip(om._group_obs_term_names[group], cfgs):
                if term.history_length > 0 or term.delay_max_lag > 0:
                    return f"observation term {group}/{name} keeps a history or delay (a Python-side pointer)"
                if isinstance(term.noise, noise_cfg.NoiseModelCfg):
                    return f"observation term {group}/{name} uses a noise model (state of its own)"
        return None

    def _decomposable(self, term: Any) -> bool:
        from duorl.envs.mjlab.graph_safe import velocity_command_supported

        return velocity_command_supported(term)

    def _tail_eager_reason(self) -> str | None:
        for name, term in self._commands:
            if not self._decomposable(term):
                return f"command {name} ({type(term).__name__}) updates per reset env"
            if float(term.cfg.resampling_time_range[0]) <= 0.0:
                return f"command {name} may resample again right after a reset (resampling_time_range starts at 0)"
        return None

    # -------------------------------------------------------------------------------------- stages

    def _physics(self) -> None:
        """ManagerBasedRlEnv.step from process_action to metrics.compute (mjlab 1.6)."""
        env = self.env
        env.action_manager.process_action(self._action_in)
        for _ in range(env.cfg.decimation):
            env.action_manager.apply_action()
            env.scene.write_data_to_sim()
            env.sim.step()
            env.scene.update(dt=env.physics_dt)
            env.metrics_manager.compute_substep()
        env.episode_length_buf += 1
        env.reset_buf = env.termination_manager.compute()
        env.reset_terminated = env.termination_manager.terminated
        env.reset_time_outs = env.termination_manager.time_outs
        env.reward_buf = env.reward_manager.compute(dt=self.step_dt)
        env.metrics_manager.compute()

    def _compute_flags(self) -> None:
        env, flags = self.env, self._flags
        flags[0].copy_(env.reset_buf)
        times = env.event_manager._interval_term_time_left
        for i, cfg in enumerate(self._interval_cfgs):
            if not cfg.is_global_time:
                times[i] -= self.step_dt
                flags[1 + i].copy_(times[i] < 1e-6)
        base = 1 + len(self._interval_cfgs)
        for j, (_, term) in enumerate(self._commands):
            if self._decomposable(term):
                # mjlab subtracts dt from the same values after sim.forward: the same float result
                flags[base + j].copy_((term.time_left - self.step_dt) <= 0.0)

    def _command_pre(self, term: Any, j: int) -> None:
        """CommandTerm.compute up to its resampling (mjlab 1.6): metrics, timer, and a check that the timer
        crossed zero for exactly the envs the flags stage predicted."""
        term._update_metrics()
        term.time_left -= self.step_dt
        predicted = self._flags[1 + len(self._interval_cfgs) + j]
        self._flags[self._check_row, 0] |= ((term.time_left <= 0.0) != predicted).any()

    def _command_resample(self, term: Any, j: int) -> None:
        ids = self._dev_ids.get(f"command{j}")
        if ids is not None:
            term._resample(ids)

    def _fire_interval_events(self) -> None:
        """EventManager.apply(mode="interval") after its timers were counted down (mjlab 1.6): the same
        draws and event calls for the envs whose timer ran out, in term order."""
        from mjlab.managers.event_manager import RecomputeLevel

        env = self.env
        em = env.event_manager
        strongest = RecomputeLevel.none
        for i, cfg in enumerate(self._interval_cfgs):
            fired = False
            lower, upper = cfg.interval_range_s
            if cfg.is_global_time:  # a CPU timer: mjlab's own code
                time_left = em._interval_term_time_left[i]
                time_left -= self.step_dt
                if time_left < 1e-6:
                    em._interval_term_time_left[i][:] = torch.rand(1) * (upper - lower) + lower
                    cfg.func(env, None, **cfg.params)
                    fired = True
            else:
                ids = self._dev_ids.get(f"interval{i}")
                if ids is not None:
                    sampled = torch.rand(len(ids), device=em.device) * (upper - lower) + lower
                    em._interval_term_time_left[i][ids] = sampled
                    cfg.func(env, ids, **cfg.params)
                    fired = True
            if fired:
                strongest = max(strongest, getattr(cfg.func, "recompute", RecomputeLevel.none))
        if strongest != RecomputeLevel.none:
            env.sim.recompute_constants(strongest)

    def _observe(self) -> None:
        self.env.obs_buf = self.env.observation_manager.compute(update_history=True)

    def _wrap(self) -> None:
        env, vec = self.env, self.vec
        out = vec.after_step(env.obs_buf, env.reward_buf, env.reset_terminated, env.reset_time_outs)
        self._out = out
        # what later stages and the caller read lives in buffers made once (a graph replays into them
        # whether this stage is a graph or eager)
        if not self._obs_out:
            self._obs_out = {k: torch.empty_like(v) for k, v in out.final_obs.items()}
            self._final_out = {k: torch.empty_like(v) for k, v in out.final_obs.items()}
            self._bad = torch.empty_like(out.bad)
        for k, v in out.final_obs.items():
            self._obs_out[k].copy_(v)
            self._final_out[k].copy_(v)
        self._bad.copy_(out.bad)
        self._nan.copy_(out.bad.sum())

    def _reset_done(self) -> None:
        """ManagerBasedRlEnv.reset(env_ids) up to its write_data_to_sim: the done envs' _reset_idx, and the
        mask of the envs the tail refreshes. Where it can be captured (`_reset_eager_reason`), its body is
        a graph per number of done envs (the draws are sized by it), between the curriculum's compute
        (Python values) before it and the curriculum's logs after it."""
        env = self.env
        ids = self._dev_ids["done"]
        env.extras["log"] = dict()
        if self._reset_why is None:
            env.curriculum_manager.compute(env_ids=ids)
            self._check_fingerprint()  # before the body: its graphs read the command ranges, among others
            self._step_count.fill_(env._sim_step_counter // env.cfg.decimation)
            self.run_stage(self._reset_stage(len(ids)))
            env.extras["log"].update(env.curriculum_manager.reset(env_ids=ids))
        else:
            env._reset_idx(ids)
            self._reset_mask.zero_()
            self._reset_mask[ids] = True
            self._check_fingerprint()

    def _reset_body(self, env_ids: torch.Tensor) -> None:
        """ManagerBasedRlEnv._reset_idx (mjlab 1.6) without its curriculum's compute and reset (run around it
        by _reset_done), with graph_safe.py's resets of the events, commands and terminations."""
        from duorl.envs.mjlab.graph_safe import command_reset, reset_events, termination_reset

        env = self.env
        env.sim.reset(env_ids)
        env.scene.reset(env_ids)
        if "reset" in env.event_manager.available_modes:
            reset_events(env, env_ids, self._step_count)
        log = env.extras["log"]
        log.update(env.observation_manager.reset(env_ids))
        log.update(env.action_manager.reset(env_ids))
        log.update(env.reward_manager.reset(env_ids))
        log.update(env.metrics_manager.reset(env_ids))
        log.update(command_reset(env, env_ids))
        log.update(env.event_manager.reset(env_ids))
        log.update(termination_reset(env, env_ids))
        env.episode_length_buf[env_ids] = 0
        env._manual_reset_pending[env_ids] = False
        self._reset_mask.zero_()
        self._reset_mask[env_ids] = True

    def _reset_stage(self, k: int) -> str:
        """The stage of the reset body for k done envs (made on first use; the least recently used graphs
        beyond MAX_RESET_GRAPHS are dropped and captured again when their k comes back)."""
        name = f"reset.k{k}"
        if name not in self._stages:
            self._stages[name] = _Stage(name, [lambda k=k: self._reset_body(self._ids_buffers[k])], True)
        self._reset_lru.pop(k, None)
        self._reset_lru[k] = None
        captured = [j for j in self._reset_lru if self._stages[f"reset.k{j}"].graph is not None]
        if len(captured) > MAX_RESET_GRAPHS:
            if self.graphs == "cuda":
                torch.cuda.current_stream(self.device).synchronize()  # no replay may still use its memory
            stage = self._stages[f"reset.k{captured[0]}"]
            stage.graph, stage.runs = None, 0
        return name

    def _reset_eager_reason(self) -> str | None:
        """Why the reset body cannot be a graph (None: it can)."""
        env = self.env
        if self.graphs == "none":
            return "graphs='none': every stage runs eagerly"
        if not self.reset_graphs:
            return "reset graphs are off (RESET_GRAPHS_BY_MODE: few counts of done envs come back)"
        obs_why = self._observations_eager_reason()
        if obs_why is not None:
            return obs_why
        em = env.event_manager
        for cfg in em._mode_term_cfgs.get("reset", []) if "reset" in em.available_modes else []:
            if cfg.min_step_count_between_reset != 0:
                return "a reset event fires only every so many steps (a host-read trigger)"
        for name, term in self._commands:
            if not self._decomposable(term) or term.cfg.init_velocity_prob > 0.0:
                return f"command {name} resets per env by a host-read draw"
        if getattr(env.curriculum_manager, "_class_term_cfgs", None):
            return "a curriculum term keeps state of its own"
        return None

    def _host_fingerprint(self) -> str:
        """The Python values the graph stages read that a curriculum may change: reward and termination
        weights and parameters, metrics and observation parameters, the command configurations."""
        env = self.env
        parts: list[Any] = []
        for manager in (env.reward_manager, env.termination_manager):
            parts += [(n, getattr(c, "weight", None), c.params) for n, c in zip(manager._term_names, manager._term_cfgs)]
        om = env.observation_manager
        parts += [(g, [(c.params, c.noise, c.clip) for c in cfgs]) for g, cfgs in om._group_obs_term_cfgs.items()]
        parts += [(name, term.cfg) for name, term in self._commands]
        return repr(parts)

    def _check_fingerprint(self) -> None:
        if not self._curricula or self.graphs == "none":
            return
        fingerprint = self._host_fingerprint()
        if self._fingerprint is not None and fingerprint != self._fingerprint:
            self.release()
            self.invalidations += 1
            self._note("a curriculum changed values the graphs read: captured again")
        self._fingerprint = fingerprint

    def _tail_commands(self) -> None:
        """CommandManager.compute(dt=0, env_ids) for the supported command terms: the timers of the reset
        envs lose nothing (x - 0 is x), nothing resamples (their timers were just drawn from
        resampling_time_range, which starts above 0), and the update reads every env (graph_safe.py)."""
        for _, term in self._commands:
            term._update_metrics()
            term._update_command(None)

    def _tail_observe(self) -> None:
        # without history or delay buffers (checked), compute(env_ids=ids) is compute() for every env
        self.env.obs_buf = self.env.observation_manager.compute(update_history=True)

    def _tail_eager(self) -> None:
        """ManagerBasedRlEnv.reset(env_ids) after _reset_idx, exactly as mjlab runs it."""
        env = self.env
        ids = self._reset_ids_now
        env.scene.write_data_to_sim()
        env.sim.forward()
        env.command_manager.compute(dt=0.0, env_ids=ids)
        env.sim.sense()
        env.obs_buf = env.observation_manager.compute(update_history=True, env_ids=ids)

    def _tail_select(self) -> None:
        """The fresh observation for the reset envs; it is also the final observation of a non-finite one."""
        fresh = self.vec.obs_of(self.env.obs_buf)
        mask = self._reset_mask.unsqueeze(1)
        bad = (self._reset_mask & self._bad).unsqueeze(1)
        for k, v in fresh.items():
            self._obs_out[k].copy_(torch.where(mask, v, self._obs_out[k]))
            self._final_out[k].copy_(torch.where(bad, v, self._final_out[k]))

    # --------------------------------------------------------------------------------------- step

    def step(self, actions: torch.Tensor) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor,
                                                   torch.Tensor, dict[str, Any]]:
        env = self.env
        self._action_in.copy_(actions)
        env.extras["log"] = dict()
        # mjlab's host counters (ManagerBasedRlEnv.step): read by the reset path and curricula
        env._sim_step_counter += env.cfg.decimation
        env.common_step_counter += 1
        timer = self.vec.phase_timer
        phase = timer.phase("collector_backend_step_ms") if timer is not None else contextlib.nullcontext()
        with phase:
            for name in self._before_read:
                self.run_stage(name)
            self._read_flags()
            for name in self._after_read:
                self.run_stage(name)
        log: dict[str, Any] = {}
        done = self._host_ids["done"]
        if len(done) > 0:
            self._reset_ids_now = self._dev_ids["done"]
            self.run_stage("reset")
            log = dict(env.extras.get("log", {}))
        extra = self._read_bad_not_done(done)
        if len(extra) > 0:
            # a non-finite env whose episode did not end: its own _reset_idx, after the done envs'
            ids = torch.as_tensor(extra, device=self.device)
            if len(done) == 0:
                self._reset_mask.zero_()
            env.extras["log"] = dict()
            with self._device_scalars():
                env._reset_idx(ids)
                self._reset_mask[ids] = True
            log.update(env.extras.get("log", {}))
            self._reset_ids_now = torch.nonzero(self._reset_mask).squeeze(-1)
        if len(done) > 0 or len(extra) > 0:
            self.run_stage("reset.tail")
            self.vec.last_log = log
        out = self._out
        return self._obs_out, out.reward, out.terminated, out.truncated, self._info()

    def _info(self) -> dict[str, Any]:
        out = self._out
        info: dict[str, Any] = {"final_obs": self._final_out, "episode_return": out.episode_return,
                                "episode_length": out.episode_length, "nan_resets": self._nan}
        if out.metrics is not None:
            info["metrics"] = out.metrics
        return info

    def _read_flags(self) -> None:
        """The one host read of every tick: done envs, fired interval timers, resampling commands."""
        if self._event is not None:
            self._flags_host.copy_(self._flags, non_blocking=True)
            self._event.record()
            self._event.synchronize()
            host = self._flags_host.numpy()
        else:
            host = self._flags.numpy().copy()
        if host[self._check_row, 0]:
            raise RuntimeError("mjlab staged step: a command's resampling envs differ from those predicted before "
                               "sim.forward (an interval event changed a command timer?); set "
                               "sim.mjlab_staged_step=false")
        self._flags[self._check_row, 0].fill_(False)  # a 0-dim view: `= False` would copy from the host
        names = ["done"] + [f"interval{i}" for i in range(len(self._interval_cfgs))] + \
                [f"command{j}" for j in range(len(self._commands))]
        self._host_ids = {name: np.flatnonzero(host[r]) for r, name in enumerate(names)}
        for name, ids in self._host_ids.items():
            kind = name.rstrip("0123456789")
            self.counts[kind] = self.counts.get(kind, 0) + len(ids)
        # right after the read the device queue is empty: the index copies wait for nothing
        self._dev_ids = {name: torch.as_tensor(ids, device=self.device) for name, ids in self._host_ids.items()
                         if len(ids) > 0 and name != "done"}
        done = self._host_ids["done"]
        if len(done) > 0:  # into the buffer of its count: a reset graph reads that one
            buf = self._ids_buffers.get(len(done))
            if buf is None:
                buf = self._ids_buffers[len(done)] = torch.empty(len(done), dtype=torch.int64, device=self.device)
            buf.copy_(torch.from_numpy(done))
            self._dev_ids["done"] = buf

    def _read_bad_not_done(self, done: np.ndarray) -> np.ndarray:
        """Envs whose state or reward turned non-finite although their episode did not end (read after the
        done envs' _reset_idx was launched, so the device has mostly caught up)."""
        bad = self._bad
        if self._event is not None:
            self._bad_host.copy_(bad, non_blocking=True)
            self._event.record()
            self._event.synchronize()
            host = self._bad_host.numpy()
        else:
            host = bad.numpy()
        ids = np.flatnonzero(host)
        return np.setdiff1d(ids, done, assume_unique=True) if len(ids) else ids

    # ----------------------------------------------------------------------------------- runner

    def run_stage(self, name: str) -> None:
        """Run one stage: replay its graph, or run it eagerly (warm-up, eager-only stages, graphs="none"),
        or capture it (its second run)."""
        stage = self._stages[name]
        if stage.graph is not None:
            stage.graph.replay()
            self.env.extras["log"].update(stage.logs)
            self.stage_runs["graph"] += 1
            return
        self.stage_runs["eager"] += 1
        if not stage.capturable or not self.capture_enabled:
            self._run_eager(stage)
            return
        if stage.runs == 0:
            self._run_eager(stage, warm_up=True)
            return
        self._capture(stage)

    def _run_eager(self, stage: _Stage, warm_up: bool = False) -> None:
        stage.runs += 1
        if self.graphs == "none":
            stage.run_parts()
            return
        # an eager stage may rebind attributes that graph stages read: watched on its first runs (and on
        # every run once it did), the new values go into the tensors the graphs hold
        watch = RebindWatch(self.env) if (warm_up or stage.keep_watching or stage.runs <= 2) else None

        def body() -> None:
            stage.run_parts()
            if watch is not None:
                watch.restore_identity()

        guard = CaptureGuard(stage.name, self._index_cache, capturing=False) if stage.capturable else None
        with self._device_scalars():
            run_eagerly_on(self._stream if warm_up else None, body, guard)
        if watch is not None and watch.rebound and not stage.capturable:
            stage.keep_watching = True

    def _device_scalars(self) -> contextlib.AbstractContextManager[None]:
        """Eager mjlab code on CUDA writes its Python scalars from the device (SCALAR_WRITES)."""
        if self.graphs == "cuda" and SCALAR_WRITES == "device":
            return scalar_writes_from_the_device()
        return contextlib.nullcontext()

    def _capture(self, stage: _Stage) -> None:
        watch = RebindWatch(self.env)
        logs_before = set(self.env.extras["log"])

        def body() -> None:
            stage.run_parts()
            watch.restore_identity()

        graph = (CudaStageGraph(stage.name, self.device, self._stream, self._solver_loop) if self.graphs == "cuda"
                 else CpuReplayGraph(stage.name))
        try:
            graph.capture_and_run(body, self.env.sim, self._index_cache)
        except StageCaptureError as e:
            if self.graphs == "cpu-replay":
                raise
            watch.undo()
            stage.capturable, stage.why_eager = False, str(e)
            if stage.name.startswith("reset.k"):
                # what fails one count's capture fails every count's: the reset goes eager as a whole,
                # rather than a failed capture for each new number of done envs
                self._reset_why = f"its capture failed: {e}"
                self._note(f"the reset body runs eagerly (mjlab's _reset_idx): {e}")
            else:
                self._note(f"stage {stage.name} runs eagerly: {e}")
            self._run_eager(stage)
            return
        stage.graph = graph
        stage.runs += 1
        stage.logs = {k: v for k, v in self.env.extras["log"].items() if k not in logs_before}
        self.captures += 1

    def _note(self, line: str) -> None:
        self.notes.append(line)
        print(f"duorl: note: mjlab staged step: {line}", file=sys.stderr, flush=True)

    def release(self) -> None:
        """Drop every graph (the next runs capture again)."""
        if self.graphs == "cuda":
            torch.cuda.synchronize(self.device)
        for stage in self._stages.values():
            if stage.graph is not None and hasattr(stage.graph, "release"):
                stage.graph.release()
            stage.graph = None
            stage.runs = 0
        if self._solver_loop is not None:
            self._solver_loop.body_captures.clear()

    def describe(self) -> dict[str, Any]:
        """For the profile and the manifest: each stage, graph or eager and why; what graph_safe bound."""
        resets = {n: s for n, s in self._stages.items() if n.startswith("reset.k")}
        return {
            "graphs": self.graphs,
            "reset_body": {"graph_per_count": self._reset_why is None, "eager_because": self._reset_why,
                           "counts_seen": len(resets), "captured": sum(s.graph is not None for s in resets.values())},
            "captures": self.captures,
            "invalidations": self.invalidations,
            "host_read_counts": dict(self.counts),
            "stage_runs": dict(self.stage_runs),
            "stages": {name: ({"graph": s.graph is not None, "runs": s.runs} if s.capturable
                              else {"graph": False, "eager_because": s.why_eager})
                       for name, s in self._stages.items() if name not in resets},
            "graphs_now": sorted(n for n, s in self._stages.items() if s.graph is not None),
            "replacements": list(self.replacements),
            "notes": list(self.notes),
        }

