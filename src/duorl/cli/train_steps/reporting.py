"""Where a duo's results go: rank 0's run directory (telemetry/run_directory.py, with the manifest's entries
that the checks decided), the reporter the duo reports to (the run directory alone; a rank's RankReporter
under data parallel) and the coordinator of the ranks' iteration boundaries (Solo alone).
"""

from __future__ import annotations

from duorl.cli.run_context import RunContext
from duorl.cli.train_steps.manifest import run_manifest
from duorl.runtime.coordination import Solo
from duorl.telemetry.run_directory import RunDirectory
from duorl.telemetry.summary import device_record


def report(run: RunContext) -> None:
    """Sets run.directory (None on ranks other than 0), run.reporter and run.coordinator."""
    place, ctx, checked, run_dir = run.place, run.place.ctx, run.checked, run.run_dir
    assert checked is not None and run_dir is not None
    if place.lead:
        (run_dir / "checkpoints").mkdir(exist_ok=True)
        entries = run_manifest(run)
        directory = run.directory = RunDirectory(run.cfg, run_dir, run.learner, run.device)
        directory.manifest.update(entries)
        # why the tick runs eagerly whatever sim.tick_cuda_graph says (an mjlab step syncs the host)
        directory.manifest["collector_tick_cuda_graph"]["eager_reason"] = checked.source.tick_eager_reason
        # which rule skips invalid steps: this process's verdict alone, or every rank's
        directory.manifest["gradient_synchronizer"] = type(run.learner.grad_sync).__name__
        if run.sync is not None:
            directory.manifest["dp_gradient_groups"] = run.sync.layout()
    if ctx is None:
        run.reporter, run.coordinator = run.directory, Solo()
        return
    from duorl.distributed.dp_coordinator import DataParallelCoordinator, RankReporter

    rank_record = {"rank": place.rank, "local_rank": ctx.env.local_rank, "host": ctx.host,
                   "device": str(run.device), "device_uuid": device_record(run.device).get("uuid")}
    run.reporter = RankReporter(ctx, run.directory, run.sync, rank_record)
    run.coordinator = DataParallelCoordinator(ctx, run.sync.watch)
