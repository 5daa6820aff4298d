"""The VecEnv contract (docs/design.md §7): batched torch tensors on the env's device, auto-reset."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Protocol

import torch

Obs = dict[str, torch.Tensor]  # {"actor": [N, actor_obs_dim], "critic": [N, critic_obs_dim]}, float32


SignedPermutation = tuple[tuple[int, ...], tuple[float, ...]]  # (index, sign): x'[i] = sign[i] * x[index[i]]


@dataclass(frozen=True)
class Mirror:
    """A task's left-right mirror image of its observations and actions, each a signed permutation
    (index, sign): mirrored[i] = sign[i] * x[index[i]]. Mirroring a transition gives another valid
    transition of the same task (the robot and the task are symmetric about the sagittal plane), which
    learners may add to their batches (algo.use_symmetry)."""

    actor_obs: SignedPermutation
    critic_obs: SignedPermutation
    action: SignedPermutation

    def __post_init__(self) -> None:
        for name in ("actor_obs", "critic_obs", "action"):
            index, sign = getattr(self, name)
            n = len(index)
            if len(sign) != n or sorted(index) != list(range(n)) or any(s not in (-1.0, 1.0) for s in sign):
                raise ValueError(f"Mirror.{name}: index must permute range({n}) and signs be +-1")
            # an involution: mirroring twice is the identity
            if any(index[index[i]] != i or sign[i] * sign[index[i]] != 1.0 for i in range(n)):
                raise ValueError(f"Mirror.{name}: mirroring twice must give the vector back")


@dataclass(frozen=True)
class EnvSpec:
    """Shapes and timing of a task, known without building the batched simulation."""

    task: str
    actor_obs_dim: int
    critic_obs_dim: int
    action_dim: int
    max_episode_steps: int
    control_dt: float
    # the task's per-step diagnostics (e.g. velocity tracking error), logged as Task/<name>: their
    # per-env values [N, M] come in info["metrics"], in this order (at most MAX_TASK_METRICS)
    metric_names: tuple[str, ...] = ()
    # the task's left-right mirror (None: not symmetric, or not described)
    mirror: Mirror | None = None

    def __post_init__(self) -> None:
        if len(self.metric_names) > MAX_TASK_METRICS:
            raise ValueError(f"a task logs at most {MAX_TASK_METRICS} metrics, {self.task} names {self.metric_names}")
        if self.mirror is not None:
            dims = (len(self.mirror.actor_obs[0]), len(self.mirror.critic_obs[0]), len(self.mirror.action[0]))
            if dims != (self.actor_obs_dim, self.critic_obs_dim, self.action_dim):
                raise ValueError(f"{self.task}: mirror sizes {dims} do not match the spec's "
                                 f"{(self.actor_obs_dim, self.critic_obs_dim, self.action_dim)}")

    def record(self) -> dict:
        """JSON-friendly description (the run manifest): the mirror as whether there is one."""
        out = dict(self.__dict__)
        out["mirror"] = self.mirror is not None
        return out


def spec_to_dict(spec: EnvSpec) -> dict[str, Any]:
    """The whole spec as JSON-friendly values (the mirror's permutations included), for a file that
    `spec_from_dict` reads back into an equal EnvSpec (envs/mjlab/spec_cache.py)."""
    out = dataclasses.asdict(spec)
    if spec.mirror is not None:
        out["mirror"] = {k: [list(v[0]), list(v[1])] for k, v in out["mirror"].items()}
    out["metric_names"] = list(spec.metric_names)
    return out


def spec_from_dict(data: dict[str, Any]) -> EnvSpec:
    """The EnvSpec `spec_to_dict` wrote; ValueError or TypeError for anything else (a field missing, one
    unknown, a value of the wrong type), so that a reader can treat the file as absent."""
    names = {f.name for f in dataclasses.fields(EnvSpec)}
    if set(data) != names:
        raise ValueError(f"EnvSpec fields {sorted(names)} expected, the file has {sorted(data)}")
    typed = {"task": str, "actor_obs_dim": int, "critic_obs_dim": int, "action_dim": int, "max_episode_steps": int}
    for name, kind in typed.items():
        if not isinstance(data[name], kind) or isinstance(data[name], bool):
            raise TypeError(f"EnvSpec.{name}: {data[name]!r} is not {kind.__name__}")
    if not isinstance(data["control_dt"], (int, float)) or isinstance(data["control_dt"], bool):
        raise TypeError(f"EnvSpec.control_dt: {data['control_dt']!r} is not a number")
    if not isinstance(data["metric_names"], list) or not all(isinstance(n, str) for n in data["metric_names"]):
        raise TypeError(f"EnvSpec.metric_names: {data['metric_names']!r} is not a list of names")
    mirror = data["mirror"]
    if mirror is not None:
        mirror = Mirror(**{k: (tuple(int(i) for i in v[0]), tuple(float(x) for x in v[1])) for k, v in mirror.items()})
    return EnvSpec(**{**data, "control_dt": float(data["control_dt"]), "metric_names": tuple(data["metric_names"]),
                      "mirror": mirror})


def spec_differences(expected: EnvSpec, actual: EnvSpec) -> list[str]:
    """One line per field in which `actual` differs from `expected` ("action_dim: 29 != 23"); empty when equal."""
    return [f"{f.name}: {getattr(expected, f.name)!r} != {getattr(actual, f.name)!r}"
            for f in dataclasses.fields(EnvSpec) if getattr(expected, f.name) != getattr(actual, f.name)]


MAX_TASK_METRICS = 16  # the collector's stat slots task_metric_0..15 (runtime/control.py)

# What the NaN guard found non-finite in the first broken env (`nan_snapshot.members`, a bit mask: bit i
# is NON_FINITE_PARTS[i]), so that a run that fails on it names the task's member, not "a NaN somewhere":
# the physics state (qpos/qvel: the task's reset() or apply_action(), or the physics itself), the
# simulator's own flag (MuJoCo C reset a diverged world, MuJoCo Warp overflowed a capacity), the task's
# reward(sim) and its observe(sim).
NON_FINITE_PARTS = ("state", "diverged", "reward", "observe")


class VecEnv(Protocol):
    """A batch of `num_envs` environments stepped together.

    step(actions) with actions [N, action_dim] in [-1, 1] returns
      obs: Obs after auto-reset (the first obs of a new episode where an episode ended),
      reward [N] float32, terminated [N] bool, truncated [N] bool (time limit),
      info: {"final_obs": Obs, the obs the step reached before any reset (equal to obs where not done);
             "episode_return" [N] float32 and "episode_length" [N] int64: the finished episode's totals,
             meaningful where terminated | truncated;
             "nan_resets" [] int64: envs reset this step because their state was not finite;
             "metrics" [len(spec.metric_names)] float32: the task's diagnostics, mean over envs,
             of the state the step reached (present when the spec names any)}.
    No host sync happens inside reset() or step(), unless the class says `tick_capturable = False` (and
    why, in `tick_eager_reason`): the collector then runs its tick eagerly (an mjlab task's env).

    VecEnvs subclass it explicitly, so that the optional parts below exist on every env with their
    defaults and the runtime reads them unconditionally.
    """

    spec: EnvSpec
    num_envs: int
    device: torch.device

    # -- optional parts (defaults: absent) -----------------------------------------------------------
    tick_capturable: bool = True
    tick_eager_reason: str | None = None
    # the env's own random stream (reset noise) on its device: a captured tick registers it
    generator: torch.Generator | None = None
    # set by the collector: the env times its physics as a phase of an eager tick (None: untimed)
    phase_timer: Any = None
    # the NaN guard's record of the first env found broken (`taken`, `tensors()`, `facts()`: what was
    # not finite, NON_FINITE_PARTS, and at which step); None: no guard
    nan_snapshot: Any = None

    def state_dict(self) -> dict[str, Any] | None:
        """The env's resume state (clones, no host sync); None: it keeps none, so a resumed run starts
        its envs afresh."""
        return None

    def load_state_dict(self, state: dict[str, Any]) -> None:
        raise NotImplementedError(f"{type(self).__name__} keeps no resume state")

    def reset(self) -> Obs: ...

    def step(self, actions: torch.Tensor, policy_actions: torch.Tensor | None = None
             ) -> tuple[Obs, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]: ...

    def close(self) -> None: ...


class Uniforms:
    """One env step's uniform [0, 1) numbers, drawn by the VecEnv in one call ([N, K], K the task's
    `uniforms_per_step`) and handed out in the order the task asks for them: `rand(n, *shape)` is the
    next prod(shape) columns. A compiled step reads slices of a tensor here instead of calling
    torch.rand(generator=...), which dynamo cannot trace (each such call split the compiled step)."""

    def __init__(self, block: torch.Tensor) -> None:
        self.block = block
        self._pos = 0

    @property
    def used(self) -> int:
        """Uniforms per env handed out so far."""
        return self._pos

    def rand(self, n: int, *shape: int) -> torch.Tensor:
        width = 1
        for d in shape:
            width *= d
        k = self.block.shape[1]
        if n != self.block.shape[0] or self._pos + width > k:
            raise ValueError(f"a task asked for uniforms [{n}, {', '.join(map(str, shape))}] after using {self._pos} "
                             f"of the {k} per env it declares (uniforms_per_step) for {self.block.shape[0]} envs: "
                             "raise the task's uniforms_per_step to what one step's advance() and reset() draw")
        out = self.block[:, self._pos:self._pos + width]
        self._pos += width
        return out.reshape(n, *shape)

