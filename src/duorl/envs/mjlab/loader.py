"""Importing mjlab quietly, its registry, and an mjlab env configured and built with duorl's settings."""

from __future__ import annotations

import contextlib
import io
import math
import os
import sys
from dataclasses import dataclass
from typing import Any

from duorl.config.errors import InputRefused


# mjlab's own registration mechanism for a package's tasks: an entry point of this group, loaded (imported)
# by `import mjlab` (mjlab/__init__.py), whose module calls mjlab.tasks.registry.register_mjlab_task
ENTRY_POINT_GROUP = "mjlab.tasks"


@dataclass(frozen=True)
class TaskPackage:
    """One `mjlab.tasks` entry point: its name and value, its distribution, the ids it registered, or the
    first line of the error its import raised."""

    name: str
    value: str
    dist: str
    task_ids: tuple[str, ...] = ()
    error: str | None = None


_packages: list[TaskPackage] | None = None


class _WithoutTaskPackages:
    """importlib.metadata.entry_points() as mjlab sees it while duorl imports it: no `mjlab.tasks` group."""

    def __init__(self, eps: Any) -> None:
        self._eps = eps

    def select(self, **params: Any) -> Any:
        import importlib.metadata as metadata

        return metadata.EntryPoints(()) if params.get("group") == ENTRY_POINT_GROUP else self._eps.select(**params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._eps, name)


def registry() -> Any:
    """mjlab.tasks.registry with every task of mjlab and of the packages on mjlab's entry points registered
    (`task_packages()` says which package registered which)."""
    from duorl.envs.mjlab.family import INSTALL, check_installed

    check_installed()
    # mjlab turns Warp's kernel-load lines on unless asked not to; duorl keeps warnings only (as its
    # own mjwarp backend does)
    os.environ.setdefault("MJLAB_WARP_QUIET", "1")
    # mjlab sets MUJOCO_GL=egl for its own renderer; duorl's video (and the processes it starts) keep the
    # user's choice
    gl = os.environ.get("MUJOCO_GL")
    try:
        _import_mjlab()
        from mjlab.tasks import registry as reg
    except ImportError as e:
        raise InputRefused(f"mjlab is installed but does not import ({type(e).__name__}: {e}). Fix: {INSTALL}") from None
    finally:
        if gl is None:
            os.environ.pop("MUJOCO_GL", None)
        else:
            os.environ["MUJOCO_GL"] = gl
    from duorl.envs.backends.mjwarp import quiet_warp

    quiet_warp()
    return reg


def task_packages() -> list[TaskPackage]:
    """The `mjlab.tasks` entry points and what each registered (after registry())."""
    registry()
    return list(_packages or [])


def _import_mjlab() -> None:
    """`import mjlab.tasks`, with the packages on mjlab's entry points loaded here, one by one, as mjlab
    itself would load them, so that each package's ids and import error are known (mjlab prints a failed
    package's traceback and goes on; duorl names it). Where mjlab was imported before, it loaded them
    itself: each is loaded again (a failed one fails again) and its ids stay unattributed."""
    global _packages
    if _packages is not None:
        return
    import importlib.metadata as metadata

    fresh = "mjlab" not in sys.modules
    real = metadata.entry_points
    if fresh:  # mjlab reads them as `importlib.metadata.entry_points().select(group=...)` as it is imported
        metadata.entry_points = lambda *a, **k: real(*a, **k) if a or k else _WithoutTaskPackages(real())  # type: ignore
    try:
        import mjlab.tasks  # noqa: F401 - registers mjlab's own tasks
    finally:
        metadata.entry_points = real  # type: ignore[assignment]
    from mjlab.tasks import registry as reg

    packages = []
    for ep in real(group=ENTRY_POINT_GROUP):
        before = set(reg.list_tasks())
        dist = ep.dist.name if getattr(ep, "dist", None) is not None else "?"
        try:
            ep.load()
        except Exception as e:  # noqa: BLE001 - a package's error, named in the listing
            text = str(e).strip().splitlines()
            packages.append(TaskPackage(ep.name, ep.value, dist, error=f"{type(e).__name__}: {text[0] if text else ''}"))
            continue
        packages.append(TaskPackage(ep.name, ep.value, dist, tuple(i for i in reg.list_tasks() if i not in before)
                                    if fresh else ()))
    _packages = packages


def env_cfg(task_id: str, task_cfg: Any, num_envs: int, seed: int, play: bool = False) -> Any:
    """mjlab's env configuration of `task_id` (`play`: its play configuration) with duorl's env count and
    seed, auto-reset off (duorl resets the done envs itself, after keeping the state the step reached),
    duorl's episode length where task.max_episode_steps sets one, and the task family's own keys
    (family.apply_keys)."""
    from duorl.envs.mjlab.family import apply_keys

    reg = registry()
    cfg = reg.load_env_cfg(task_id, play=play)
    apply_keys(task_cfg, cfg)
    max_episode_steps = task_cfg.max_episode_steps
    step_dt = cfg.sim.mujoco.timestep * cfg.decimation
    if max_episode_steps is not None:
        cfg.episode_length_s = max_episode_steps * step_dt
        # mjlab's length in steps is ceil(episode_length_s / step_dt): keep it n despite rounding
        while max_episode_steps_of(cfg) > max_episode_steps:
            cfg.episode_length_s = math.nextafter(cfg.episode_length_s, 0.0)
    elif play:
        # mjlab's play configurations run (nearly) forever for its viewer; duorl play evaluates whole
        # episodes, so they end where the training configuration's do
        train_length_s = reg.load_env_cfg(task_id).episode_length_s
        cfg.episode_length_s = min(cfg.episode_length_s, train_length_s)
    cfg.scene.num_envs = int(num_envs)
    cfg.seed = int(seed)
    cfg.auto_reset = False
    return cfg


def max_episode_steps_of(cfg: Any) -> int:
    """mjlab's episode length in control steps (ManagerBasedRlEnv.max_episode_length, without building)."""
    return math.ceil(cfg.episode_length_s / (cfg.sim.mujoco.timestep * cfg.decimation))


def build_env(cfg: Any, device: str, render: bool = False) -> Any:
    """mjlab's ManagerBasedRlEnv for `cfg` on `device` (a torch device string; mjlab hands it to Warp:
    'cpu' is Warp's CPU device). Its tables of managers go nowhere: the run's console stays duorl's. Its
    physics' Warp modules compile in parallel as it is built (kernel_preload.py)."""
    import torch
    from mjlab.envs import ManagerBasedRlEnv

    from duorl.envs.backends.mjwarp import warp_device_for
    from duorl.envs.mjlab.kernel_preload import preloading

    dev = warp_device_for(torch.device(device))
    with contextlib.redirect_stdout(io.StringIO()), preloading():
        return ManagerBasedRlEnv(cfg, device=dev, render_mode="rgb_array" if render else None)

