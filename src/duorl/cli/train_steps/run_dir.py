"""The run-directory step of `duorl train`: rank 0 claims a new run directory (atomically: never an existing
one, telemetry/run_dir_claim.py) and writes run_config.json into it; every rank learns its path, since
global rank 0 may sit on another host (docs/distributed.md).
"""

from __future__ import annotations

from pathlib import Path

from duorl.cli.run_context import RunContext
from duorl.telemetry.run_dir_claim import claim_run_dir
from duorl.telemetry.run_directory import default_run_dir
from duorl.telemetry.summary import write_json_atomic


def claim(run: RunContext) -> None:
    """Claim the run directory (rank 0) and share its path (sets run.run_dir)."""
    cfg, place, ctx = run.cfg, run.place, run.place.ctx
    run_dir: Path | None = None
    if place.lead:
        run_dir = claim_run_dir(cfg.training.log_dir, default_run_dir(cfg.task.name, cfg.algo.name))
        write_json_atomic(run_dir / "run_config.json", run.record)
        print(f"duorl: run directory {run_dir}", flush=True)
    if ctx is not None:
        # global rank 0 (whichever host the rendezvous made it) writes the run directory: every other
        # node says where it is (docs/distributed.md)
        path, writer = ctx.broadcast((str(run_dir), ctx.host) if place.lead else None, "sharing the run directory")
        run_dir = Path(path)
        if not place.lead and ctx.env.local_rank == 0:
            print(f"duorl: run directory {run_dir} on {writer} (written by rank 0)", flush=True)
    assert run_dir is not None
    run.run_dir = run_dir
