"""The run manifest's entries that the checks decided (devices, switches, graphs, the task's shapes, the
resume, the compile caches): rank 0 writes them into its run directory's manifest (reporting.py); the entries
that only the run can tell ("active" graphs) are updated after it (finish.py).
"""

from __future__ import annotations

from typing import Any

from duorl.cli.run_context import RunContext
from duorl.gpu.compiling import compile_cache_dirs
from duorl.telemetry.summary import device_record, host_record, package_versions


def run_manifest(run: RunContext) -> dict[str, Any]:
    """The entries, from run.cfg, run.checked, the run's place and device."""
    cfg, checked = run.cfg, run.checked
    assert checked is not None
    tr, algo, switches = cfg.training, cfg.algo, checked.switches
    return {
        "world_size": run.place.world,
        "rank": 0,
        "data_parallel": run.place.data_parallel,
        "devices": [device_record(run.device)],
        "env_device": switches.env_device,
        "sim": cfg.sim.name,
        "host": host_record(),
        "versions": package_versions(),
        "switches": switches.record(),
        # "enabled": the resolved setting; "active" (updated after the run): a captured graph ran
        "whole_cycle_cuda_graph": {
            "configured": algo.algo_params.whole_cycle_cuda_graph,
            "dp_configured": algo.algo_params.dp_whole_cycle_cuda_graph,
            "enabled": switches.whole_cycle_cuda_graph,
            "dp_graph": switches.dp_whole_cycle_cuda_graph,
            "active": False,
        },
        # "active" (updated after the run): the collector replayed a captured tick
        "collector_tick_cuda_graph": {
            "configured": cfg.sim.tick_cuda_graph,
            "enabled": switches.tick_cuda_graph,
            "active": False,
            # sim.tick_compile: the step's tensor code compiled into fused kernels
            "compiled": {"configured": cfg.sim.tick_compile, "enabled": switches.tick_compile},
            # sim.solver_early_exit: MuJoCo Warp's solver loop as a conditional node of the tick graph
            "solver_early_exit": {"configured": cfg.sim.solver_early_exit, "enabled": switches.solver_early_exit},
        },
        "max_wall_minutes": tr.max_wall_minutes,
        "dp_gradient_wire_dtype": tr.dp_gradient_wire_dtype,
        "env_spec": checked.spec.record(),
        "resumed_from": checked.resumed_from,
        # where compiled code is kept between runs (docs/guide.md "Compile caches"); learner and collector share them
        "compile_caches": compile_cache_dirs(),
    }
