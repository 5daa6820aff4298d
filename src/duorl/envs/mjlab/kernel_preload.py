"""The Warp modules of mjlab's physics compiled in parallel while mjlab builds its env (issue #42).

A cold mjlab env compiles its MuJoCo Warp modules one by one, on the thread that first launches each: on
CUDA inside mjlab's Simulation (its create_graph captures step, forward and reset_data as it is built),
on Warp's CPU device at the env's first reset and step (benchmarks/2026-12-03_mjlab_warp_preload_cpu/).
`preloading()` wraps mjlab's `Simulation._finish_init`, the one place both of mjlab's model paths (one
model, per-world mesh variants) pass once the MuJoCo Warp model is final (its Warp-only options applied)
and before any of its kernels launch: there a dry step, forward and reset of that model on a scratch Data
of one world lists the modules they launch (envs/backends/warp_preload.py, nothing launched), a pool of
compile_threads() threads loads them, and the build waits for them before mjlab goes on. Waiting there
keeps two threads from compiling one module at once (mjlab's next launches load the same modules); what
it gains is the parallel compile. The modules outside the three calls (mjlab's sensors' BVH and ray
casts, its own kernels) still load where mjlab launches them.

Nothing of the env is launched differently: the dry run touches only the scratch Data, and the real
launches find their modules loaded. A failure of the listing only loses the head start (a warning); a
failed load is left to mjlab's launch, which raises it where it would have.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

WHAT = "mjlab's physics (MuJoCo Warp step, forward, reset_data)"


def list_modules(sim: Any) -> list[tuple[Any, Any]]:
    """(module, block_dim) of every launch mjlab's physics calls make on `sim`'s model, none launched:
    step, forward and reset_data on a scratch Data of one world with the capacities mjlab's Data gets."""
    import mujoco_warp as mjwarp
    import warp as wp

    from duorl.envs.backends import warp_preload

    with wp.ScopedDevice(sim.wp_device):
        scratch = mjwarp.put_data(sim._mj_model, sim._mj_data, nworld=1, nconmax=sim.cfg.nconmax,
                                  njmax=sim.cfg.njmax)
        mask = wp.zeros(1, dtype=bool)
        m = sim._wp_model

        def calls() -> None:
            mjwarp.step(m, scratch)
            mjwarp.forward(m, scratch)
            mjwarp.reset_data(m, scratch, reset=mask)

        # the solver's conditional loop would read its (never written) condition on the host forever on
        # the CPU device: the dry run uses the fixed-iteration loop, which launches the same modules
        conditional = m.opt.graph_conditional
        m.opt.graph_conditional = False
        try:
            modules = warp_preload.step_modules(calls)
        finally:
            m.opt.graph_conditional = conditional
        wp.synchronize_device(sim.wp_device)  # the dry run's native work on the scratch arrays is done
    return modules


@contextlib.contextmanager
def preloading() -> Iterator[None]:
    """Within the block, every mjlab Simulation built first compiles its physics' modules in parallel
    (nothing happens where DUORL_WARP_COMPILE_THREADS=0)."""
    from mjlab.sim.sim import Simulation

    from duorl.envs.backends import warp_preload

    if warp_preload.compile_threads() == 0:
        yield
        return
    real = Simulation._finish_init

    def finish_init(sim: Any) -> None:
        preload = warp_preload.start(lambda: list_modules(sim), sim.wp_device, WHAT)
        if preload is not None:
            warp_preload.finish(preload)
        real(sim)

    Simulation._finish_init = finish_init  # type: ignore[method-assign]
    try:
        yield
    finally:
        Simulation._finish_init = real  # type: ignore[method-assign]
