"""The Warp modules a MuJoCo Warp step launches, compiled in parallel and ahead of the first step.

Warp compiles a kernel module the first time one of its kernels launches, on the launching thread, one
module after the other: a cold machine's first G1 step compiles its 35 modules in series (30-55 s on the
development VM's CPU device, benchmarks/2026-12-02_startup_phases_cpu/). Which modules a step launches is known
only by running it, because MuJoCo Warp builds most of its kernels when a step first asks for them
(closures specialised to the model). So:

1. `step_modules(step)` runs the step's Python once with Warp's `Module.load` replaced by a recorder:
   each launch records its (module, block_dim) and then returns without launching, which is Warp's own
   path for a module without an executable (warp/_src/context.py, launch). Only `launch` is answered
   so: other callers of `Module.load` need the executable itself (on CUDA, MuJoCo Warp asks
   `wp.get_suggested_block_size` of its sparse kernels, which raises on a module without one), so
   they get a real load, in line, and the module is then cached for the run. The caller runs it on a
   scratch Data of one world, so the real worlds are untouched (Warp's native helpers, a memset or a
   sort, still run on the scratch arrays).
2. `Preload.start` loads those modules on a pool of threads, from a background thread, as
   `wp.force_load` does (Warp serialises its code generation under a lock; the compile itself, NVRTC or
   LLVM, runs in parallel), while the caller goes on: the collector builds its actor, resets and starts
   its tick's torch.compile. `Preload.wait` (the backend's first step) joins it.

`start` and `finish` are those two steps with their failure path and their start-up phases ("warp modules
listed", "warp modules preloaded"), shared by the two callers: the mjwarp backend (a dry step of its
model) and the mjlab env build (envs/mjlab/kernel_preload.py: a dry step, forward and reset of mjlab's
Simulation, as soon as its MuJoCo Warp model exists).

Modules already in Warp's kernel cache load in milliseconds either way. Anything unexpected in the dry
step (a Warp that launches differently) only loses the head start: the first step then loads as before.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

# threads compiling at once, as Warp's own default for force_load (min(cpu_count, 4)): a step's modules
# are unequal (G1: the largest two are 42% of the whole), so more threads gain little, and each thread
# builds its own precompiled header first (Warp keeps them per thread), 1-2 CPU seconds each on the
# development VM. DUORL_WARP_COMPILE_THREADS=N sets it; 0 turns the preload off (the first step loads
# its modules one by one, as before it existed).
MAX_WORKERS = 4
THREADS_ENV = "DUORL_WARP_COMPILE_THREADS"
# the one caller of Module.load that returns early, launching nothing, when the load gives no executable
LAUNCH = "launch"


def compile_threads() -> int:
    """The preload's thread count: $DUORL_WARP_COMPILE_THREADS, else min(MAX_WORKERS, cores); 0 = no preload."""
    value = os.environ.get(THREADS_ENV)
    if value:
        try:
            return max(0, int(value))
        except ValueError:
            raise ValueError(f"{THREADS_ENV}={value!r}: give a whole number of threads (0 turns the preload off)") from None
    return min(MAX_WORKERS, os.cpu_count() or 1)


def step_modules(step: Callable[[], None]) -> list[tuple[Any, Any]]:
    """(module, block_dim) of every kernel launch `step` makes, in launch order, without launching any."""
    from warp._src.context import Module

    seen: dict[tuple[int, Any], tuple[Any, Any]] = {}
    real_load = Module.load
    me = threading.get_ident()

    def record(self: Any, device: Any, block_dim: Any = None, *args: Any, **kwargs: Any) -> Any:
        if threading.get_ident() != me or sys._getframe(1).f_code.co_name != LAUNCH:
            # another thread's load (an earlier backend's preload), or a query that needs the executable
            return real_load(self, device, block_dim, *args, **kwargs)
        seen.setdefault((id(self), block_dim), (self, block_dim))
        return None  # launch() returns early: nothing runs

    Module.load = record  # type: ignore[method-assign]
    try:
        step()
    finally:
        Module.load = real_load  # type: ignore[method-assign]
    return list(seen.values())


def start(list_modules: Callable[[], list[tuple[Any, Any]]], device: Any, what: str) -> "Preload | None":
    """Run `list_modules` (a dry run under `step_modules`) and start loading what it lists; None where the
    preload is off (compile_threads() == 0) or the listing raised (a warning naming `what`: only the head
    start is lost, the real launches load their modules one by one)."""
    if compile_threads() == 0:
        return None
    t0 = time.time()
    try:
        modules = list_modules()
    except Exception as e:  # noqa: BLE001 - only the head start is lost: the launches load them themselves
        print(f"duorl: warning: {what}'s Warp kernel modules were not listed ahead of its first launches "
              f"({type(e).__name__}: {e}); they compile one by one", file=sys.stderr, flush=True)
        return None
    from duorl.startup_phases import PHASES

    preload = Preload(modules, device).start()
    PHASES.add("warp modules listed", t0, modules=float(len(modules)))
    return preload


def finish(preload: "Preload") -> None:
    """Wait for `preload` and record it as the start-up phase "warp modules preloaded"."""
    from duorl.startup_phases import PHASES

    t0 = time.time()
    preload.wait()
    PHASES.add("warp modules preloaded", preload.started, preload.ended, modules=float(len(preload.modules)),
               workers=float(preload.workers), first_step_waited_s=time.time() - t0)


class Preload:
    """Loading (compiling where not cached) a list of Warp modules on a background thread."""

    def __init__(self, modules: list[tuple[Any, Any]], device: Any, workers: int | None = None) -> None:
        # the largest first (kernels per module as their size): the last to finish is then a small one
        self.modules = sorted(modules, key=lambda m: -len(getattr(m[0], "kernels", ())))
        self.device = device
        self.workers = max(1, min(workers or compile_threads() or 1, len(modules) or 1))
        self.started = self.ended = 0.0  # time.time() of the loads' start and end
        self.error: BaseException | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> "Preload":
        self._thread = threading.Thread(target=self._load_all, name="duorl-warp-preload", daemon=True)
        self._thread.start()
        return self

    def _load_all(self) -> None:
        self.started = time.time()
        try:
            if self.workers == 1:
                for module, block_dim in self.modules:
                    module.load(self.device, block_dim)
            else:
                with ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="duorl-warp-compile") as pool:
                    for f in [pool.submit(module.load, self.device, block_dim) for module, block_dim in self.modules]:
                        f.result()
        except BaseException as e:  # noqa: BLE001 - the first step loads what is missing and raises it there
            self.error = e
        self.ended = time.time()

    def wait(self) -> None:
        """Until every module is loaded. A load that failed is left to the step, which raises it where it
        would have without the preload."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
