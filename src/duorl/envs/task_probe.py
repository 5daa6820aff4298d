"""The contract probe: a task from outside duorl (entry point, import path) steps once in two MuJoCo C
worlds before a run starts, each member called on its own, so that a task that breaks the Task contract
(envs/tasks/base.py, docs/tasks.md "What a task supplies") is refused in one line naming the member, what
it returned and what duorl expects, instead of a torch broadcast message from inside the collector.

Checked in the order a step calls them: mj_model (a model with actuators, whose timestep times `substeps`
is the spec's control_dt), bind, reset (qpos [N, nq], qvel [N, nv]), observe ({"actor", "critic"} float32
[N, dim]), apply_action (ctrl [N, nu]), reward (float32 [N]), terminated (bool [N]) and the optional
members a task has (truncated, metrics, advance, evaluate); then one reset and step of the TaskVecEnv the
run builds, for what only the whole step shows. Every refusal is a ConfigError on task.name.

The values a reset and one step (zero actions) give must be finite too: the reset's qpos and qvel, the
observations after it and after the step, the reward. A task that is NaN from its first step would only
train on NaN (every env reset by the NaN guard, every update skipped); one that turns NaN later is the
run's to find (runtime/task_finiteness.py fails it, naming the member and the step).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import torch

from duorl.config.errors import ConfigError, InputRefused
from duorl.envs.base import Uniforms

N = 2  # worlds the probe steps: enough to tell a per-env [N] from a scalar or a [N, 1]
DOC = "docs/tasks.md, What a task supplies"


class _Broken(Exception):
    """One member broke the contract: the problem, what the contract expects, the fix."""

    def __init__(self, problem: str, expected: str, fix: str) -> None:
        super().__init__(problem)
        self.problem, self.expected, self.fix = problem, expected, fix


def _got(x: Any) -> str:
    """What a member returned, as the messages name it: dtype and shape of a tensor, else its type."""
    if isinstance(x, torch.Tensor):
        return f"a {str(x.dtype).replace('torch.', '')} tensor of shape {tuple(x.shape)}"
    if isinstance(x, (tuple, list)):
        return f"a {type(x).__name__} of {len(x)}"
    return f"a {type(x).__name__}" + (f" ({x!r})" if isinstance(x, (int, float, bool)) else "")


def _call(member: str, fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)`, its error named as the member's."""
    try:
        return fn(*args)
    except InputRefused:
        raise
    except Exception as e:  # noqa: BLE001 - the user's task: name the member and its error
        text = str(e).strip().splitlines()
        raise _Broken(f"its {member} raised {type(e).__name__}: {text[0] if text else '(no message)'}",
                      "a member that runs on a batch of envs", f"fix {member} ({DOC})") from None


def _tensor(member: str, x: Any, shape: tuple[int, ...], dtype: str, fix: str) -> torch.Tensor:
    """`x` is a tensor of `shape` whose dtype is `dtype` ("float32", "bool", or "float": any float).
    `member`: what returned it ("reward(sim)"; a part of it: "reset(mask, rng)|qpos")."""
    want = f"a {dtype} tensor of shape {shape}"
    ok = isinstance(x, torch.Tensor) and tuple(x.shape) == shape and (
        x.is_floating_point() if dtype == "float" else str(x.dtype) == f"torch.{dtype}")
    if not ok:
        call, _, part = member.partition("|")
        said = f"its {call} returned {part} as {_got(x)}" if part else f"its {member} returned {_got(x)}"
        raise _Broken(said, f"{want} (N={shape[0]} envs)", fix)
    return x


def _finite(member: str, x: torch.Tensor, fix: str) -> None:
    """Every value of `x` (what `member` returned, already of the right shape and dtype) is finite."""
    bad = int((~torch.isfinite(x)).sum())
    if bad:
        call, _, part = member.partition("|")
        what = f"its {call} returned {part} with" if part else f"its {member} returned"
        raise _Broken(f"{what} {bad} of {x.numel()} values NaN or inf", "finite values (a run would reset "
                      "every env for them and skip every update)", fix)


def _observation(member: str, obs: Any, spec: Any) -> None:
    fix = f"return {{'actor': float32 [N, {spec.actor_obs_dim}], 'critic': float32 [N, {spec.critic_obs_dim}]}} from observe"
    if not isinstance(obs, dict) or set(obs) != {"actor", "critic"}:
        got = f"a dict with keys {sorted(map(str, obs))}" if isinstance(obs, dict) else _got(obs)
        raise _Broken(f"its {member} returned {got}", "a dict with the keys 'actor' and 'critic'", fix)
    for key, dim in (("actor", spec.actor_obs_dim), ("critic", spec.critic_obs_dim)):
        _tensor(f"{member.split(' ')[0]}|obs['{key}']", obs[key], (N, dim), "float32", fix)
    for key in ("actor", "critic"):
        _finite(f"{member}|obs['{key}']", obs[key], f"make observe(sim) return finite values ({DOC})")


def _model_checks(task: Any, model: Any) -> None:
    """A model the policy can drive, stepped at the spec's control step."""
    import mujoco

    if not isinstance(model, mujoco.MjModel):
        raise _Broken(f"its mj_model() returned {_got(model)}", "a mujoco.MjModel", "return mujoco.MjModel.from_xml_path(...)")
    if model.nu < 1:
        raise _Broken("its mj_model() has no actuators (nu=0): the policy's actions would drive nothing",
                      "a model with at least one actuator", "add an <actuator> to the task's MJCF")
    substeps, dt = getattr(task, "substeps", None), float(model.opt.timestep)
    if isinstance(substeps, bool) or not isinstance(substeps, int) or substeps < 1:
        raise _Broken(f"its substeps={substeps!r} is not an integer >= 1", "physics steps per control step >= 1",
                      "set the task's substeps")
    control_dt = task.spec.control_dt
    if not math.isclose(control_dt, substeps * dt, rel_tol=1e-6, abs_tol=1e-12):
        raise _Broken(f"its spec's control_dt={control_dt:g} s contradicts substeps * timestep = {substeps} * {dt:g} s "
                      f"= {substeps * dt:g} s", "control_dt == substeps * the model's timestep",
                      f"set control_dt={substeps * dt:g} in the EnvSpec, or change substeps or the MJCF's timestep")
    per_step = getattr(task, "uniforms_per_step", 0)
    if isinstance(per_step, bool) or not isinstance(per_step, int) or per_step < 0:
        raise _Broken(f"its uniforms_per_step={per_step!r} is not an integer >= 0",
                      "how many uniforms one step draws per env", "set the task's uniforms_per_step")


def _members(task: Any) -> None:
    """Each member once, in a step's order, on two MuJoCo C worlds."""
    from duorl.envs.backends.mujoco_cpu import MujocoBackend

    spec = task.spec
    model = _call("mj_model()", task.mj_model)
    _model_checks(task, model)
    backend = MujocoBackend(model, N, task.substeps, nthread=1)
    try:
        _call("bind(N, device)", task.bind, N, torch.device("cpu"))
        rng = lambda: Uniforms(torch.rand(N, int(getattr(task, "uniforms_per_step", 0))))  # noqa: E731
        mask = torch.ones(N, dtype=torch.bool)
        state = _call("reset(mask, rng)", task.reset, mask, rng())
        fix = "return (qpos [N, nq], qvel [N, nv]) from reset"
        if not isinstance(state, (tuple, list)) or len(state) != 2:
            raise _Broken(f"its reset(mask, rng) returned {_got(state)}", "a pair (qpos, qvel)", fix)
        _tensor("reset(mask, rng)|qpos", state[0], (N, model.nq), "float", f"{fix} (the model has nq={model.nq})")
        _tensor("reset(mask, rng)|qvel", state[1], (N, model.nv), "float", f"{fix} (the model has nv={model.nv})")
        for i, part in enumerate(("qpos", "qvel")):
            _finite(f"reset(mask, rng)|{part}", state[i], f"return a finite {part} from reset")
        backend.reset_envs(mask, state[0], state[1])
        _observation("observe(sim) after reset", _call("observe(sim)", task.observe, backend), spec)
        actions = torch.zeros(N, spec.action_dim)
        ctrl = _call("apply_action(actions)", task.apply_action, actions, None)
        _tensor("apply_action(actions)", ctrl, (N, model.nu), "float",
                f"map actions [N, {spec.action_dim}] to ctrl [N, nu] (the model has nu={model.nu} actuators)")
        backend.step(ctrl)
        reward = _tensor("reward(sim)", _call("reward(sim)", task.reward, backend), (N,), "float32",
                         "return one float32 per env from reward, e.g. r.float() of shape [N] (not r[:, None], "
                         "not a Python float)")
        _finite("reward(sim) after a step", reward, f"make reward(sim) return finite values ({DOC})")
        _tensor("terminated(sim)", _call("terminated(sim)", task.terminated, backend), (N,), "bool",
                "return one bool per env from terminated, e.g. (height < 0.3) of shape [N]")
        _optional(task, backend, rng, spec)
        _observation("observe(sim) after a step", _call("observe(sim)", task.observe, backend), spec)
    finally:
        backend.close()


def _optional(task: Any, backend: Any, rng: Callable[[], Uniforms], spec: Any) -> None:
    """The optional members a task has, each checked like the required ones."""
    truncated = getattr(task, "truncated", None)
    if truncated is not None:
        _tensor("truncated(sim)", _call("truncated(sim)", truncated, backend), (N,), "bool",
                "return one bool per env from truncated")
    metrics = getattr(task, "metrics", None)
    if metrics is not None and spec.metric_names:
        _tensor("metrics(sim)", _call("metrics(sim)", metrics, backend), (N, len(spec.metric_names)), "float",
                f"return [N, {len(spec.metric_names)}] (one column per spec.metric_names entry) from metrics")
    advance = getattr(task, "advance", None)
    if advance is not None:
        _call("advance(sim, rng)", advance, backend, rng())
    evaluate = getattr(task, "evaluate", None)
    if evaluate is not None:
        out = _call("evaluate(sim)", evaluate, backend)
        if not isinstance(out, (tuple, list)) or len(out) != 3:
            raise _Broken(f"its evaluate(sim) returned {_got(out)}", "a triple (reward, terminated, obs)",
                          "return (reward [N], terminated [N], obs) from evaluate")
        _tensor("evaluate(sim)|reward", out[0], (N,), "float32", "return a float32 reward [N] from evaluate")
        _tensor("evaluate(sim)|terminated", out[1], (N,), "bool", "return a bool terminated [N] from evaluate")
        _observation("evaluate(sim)", out[2], spec)


def _whole_step(task: Any) -> None:
    """One reset and step of the VecEnv a run builds: what the members' interplay breaks (the uniforms a
    step draws, buffers bind() did not size)."""
    from duorl.envs.backends.mujoco_cpu import MujocoBackend
    from duorl.envs.vec_env import TaskVecEnv

    env = TaskVecEnv(task, MujocoBackend(task.mj_model(), N, task.substeps, nthread=1), seed=0, nan_guard=False)
    try:
        env.reset()
        env.step(torch.zeros(N, task.spec.action_dim))
    finally:
        env.close()


def probe_task(task: Any, name: str) -> None:
    """Step `task` (unbound, from a package's factory) against the Task contract (module docstring); a
    ConfigError naming task.name=`name`, the member, what it returned and what duorl expects, otherwise."""
    try:
        _members(task)
        try:
            _whole_step(task)
        except InputRefused:
            raise
        except Exception as e:  # noqa: BLE001 - the members each passed: the whole step names its error
            text = str(e).strip().splitlines()
            raise _Broken(f"one step of the task raised {type(e).__name__}: {text[0] if text else '(no message)'}",
                          "a task that obeys the Task contract", f"fix the task ({DOC})") from None
    except _Broken as b:
        raise ConfigError("task.name", name, b.problem, b.expected, b.fix) from None
