"""torch.compile as this package uses it, and where compiled code is kept between runs.

Both CUDA-graph owners compile: the learners their networks (config/switches.py says when), and the
envs the tensor code of a step (envs/vec_env.py), so that a captured graph replays a few fused kernels
instead of hundreds of small ones. Compilation always happens on an eager call before any capture (fixed
shapes); a capture only replays what was compiled then.

Compiling from nothing costs minutes on a GPU (benchmarks/2026-12-02_g1_walk_head_h200/: the learner's
capture 37.8 s cold, 5-6 s once the caches were filled). torch keeps Inductor's FX graphs, AOTAutograd's
graphs and Triton's kernels under one directory, by default `/tmp/torchinductor_<user>`, which a reboot
or a fresh container empties. `use_persistent_compile_caches` moves it under duorl's own cache, unless
the user named a place; Warp's kernel cache (MuJoCo Warp's kernels) is persistent by default and stays
where Warp puts it. docs/guide.md "Compile caches" lists them and how to clear them.
"""

from __future__ import annotations

import getpass
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

DUORL_CACHE_ENV = "DUORL_CACHE_DIR"
# torch reads it each time it needs the directory; Triton's kernels go to its triton/<device>
# subdirectory unless TRITON_CACHE_DIR says otherwise
INDUCTOR_CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"
TRITON_CACHE_ENV = "TRITON_CACHE_DIR"
WARP_CACHE_ENV = "WARP_CACHE_PATH"


def duorl_cache_root() -> Path:
    """The root of every cache duorl owns (models, compiled code): $DUORL_CACHE_DIR, else
    $XDG_CACHE_HOME/duorl, else ~/.cache/duorl."""
    if os.environ.get(DUORL_CACHE_ENV):
        return Path(os.environ[DUORL_CACHE_ENV]).expanduser()
    return _user_cache_home() / "duorl"


def default_inductor_cache_dir() -> Path:
    """Where duorl points torch's compile caches when the user has not: <duorl cache>/compile/torchinductor."""
    return duorl_cache_root() / "compile" / "torchinductor"


def use_persistent_compile_caches() -> dict[str, str]:
    """Point torch's compile caches (Inductor FX graphs, AOTAutograd, Triton kernels, Dynamo's
    profiles) at duorl's cache, unless $TORCHINDUCTOR_CACHE_DIR is already set (or duorl's cache
    cannot be created: torch's default stays); returns `compile_cache_dirs()`.

    Call it before anything imports torch._dynamo: that import (torch.compile, and every torch
    optimizer's constructor) fills in torch's /tmp default, after which the variable looks set. The
    learner calls it first thing (cli/train.py) and its spawned collector inherits the environment, so
    both processes use one directory; `duorl bench learner|collector` call it first too, and
    maybe_compile calls it for any other process that compiles (in time only if nothing imported
    torch._dynamo before).
    """
    _point_torch_at_duorls_cache()
    return compile_cache_dirs()


def _point_torch_at_duorls_cache() -> None:
    if INDUCTOR_CACHE_ENV in os.environ:
        return
    target = default_inductor_cache_dir()
    try:
        target.mkdir(parents=True, exist_ok=True)
        usable = os.access(target, os.W_OK | os.X_OK)
    except OSError:
        usable = False
    # an unwritable home keeps torch's default: torch creates its directory when Dynamo is imported,
    # and a cache it cannot create would fail the run there, far from the cause
    if usable:
        os.environ[INDUCTOR_CACHE_ENV] = str(target)


def compile_cache_dirs() -> dict[str, str]:
    """Where this process's compiled code is cached (the run manifest's `compile_caches`): torch's
    directory, Triton's kernels (for device index N: the `triton/N` subdirectory unless
    $TRITON_CACHE_DIR is set) and Warp's kernels, resolved as torch and Warp resolve them."""
    inductor = os.path.abspath(os.environ.get(INDUCTOR_CACHE_ENV) or torch_default_inductor_dir())
    return {
        "torchinductor": inductor,
        "triton": os.environ.get(TRITON_CACHE_ENV) or os.path.join(inductor, "triton"),
        "warp": str(warp_kernel_cache_dir()),
    }


def warp_kernel_cache_dir() -> Path:
    """Warp's kernel cache as `warp.init()` resolves it (warp/_src/build.py, init_kernel_cache), without
    importing warp: $WARP_CACHE_PATH/<version>, else the user cache directory ($XDG_CACHE_HOME or
    ~/.cache)/warp/<version>. A process that has initialised warp reports warp's own value."""
    wp = sys.modules.get("warp")
    configured = getattr(getattr(wp, "config", None), "kernel_cache_dir", None)
    if configured:
        return Path(configured)
    from importlib import metadata

    try:
        version = metadata.version("warp-lang")
    except metadata.PackageNotFoundError:
        version = "unknown"
    if os.environ.get(WARP_CACHE_ENV):
        return Path(os.path.realpath(os.environ[WARP_CACHE_ENV])) / version
    return _user_cache_home() / "warp" / version


def torch_default_inductor_dir() -> str:
    """The directory torch uses when $TORCHINDUCTOR_CACHE_DIR is unset (torch/_inductor/runtime/
    cache_dir_utils.py, default_cache_dir): <tempdir>/torchinductor_<user>. Computed here because
    importing torch._inductor imports torch._dynamo, which sets the variable to this very value;
    tests/gpu/test_compiling.py checks it against torch's function."""
    try:
        user = getpass.getuser()
    except (KeyError, ModuleNotFoundError, OSError):
        user = f"uid_{os.getuid()}" if hasattr(os, "getuid") else "unknown_user"
    return os.path.join(tempfile.gettempdir(), "torchinductor_" + re.sub(r'[\\/:*?"<>|]', "_", user))


def _user_cache_home() -> Path:
    """$XDG_CACHE_HOME, else ~/.cache (what appdirs, and so Warp, use on Linux)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser()


def maybe_compile(fn: F, enabled: bool) -> F:
    """`torch.compile(fn, dynamic=False)` when enabled, else `fn` itself."""
    if not enabled:
        return fn
    _point_torch_at_duorls_cache()  # use_persistent_compile_caches, before torch._dynamo is imported below
    import torch

    from duorl.gpu import torch_internals

    # every learner/env instance, batch shape, and train/eval or frozen/unfrozen call of a network is
    # a variant: keep them all compiled rather than silently falling back to eager at the default 8
    torch_internals.raise_dynamo_cache_limit(64)
    return torch.compile(fn, dynamic=False)  # type: ignore[return-value]
