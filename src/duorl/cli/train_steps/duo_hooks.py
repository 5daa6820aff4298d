"""The hooks `duorl train` hands its duo (runtime/duo.Duo): on_startup writes both processes' start-up
phases into the run directory; on_collector_ready proves, once both processes hold a CUDA context, that they
share one GPU as the CUDA MPS daemon's clients (MPS fails open, so the probe before the run is not enough).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from duorl.mps.session import MpsSession, MpsVerdict, mps_manifest
from duorl.runtime.atomic_files import WriteFailed
from duorl.runtime.duo import StartRefused
from duorl.telemetry.summary import write_json_atomic


def write_startup(run_dir: Path, record: dict[str, Any]) -> None:
    """The duo's on_startup: both processes' start-up phases into RUN_DIR/startup.json, and the line that
    ends the start-up table on the console."""
    path = run_dir / "startup.json"
    try:
        write_json_atomic(path, record)
    except WriteFailed as e:  # the table is a report: the run goes on (the next write fails it, if the disk is full)
        print(f"duorl: warning: {e}", file=sys.stderr, flush=True)
        return
    done = next((p for p in record["learner"] if p["name"] == "first update"), None)
    what = "first update" if done is not None else "start-up ended without an update"
    end = done["end_s"] if done is not None else max(p["end_s"] for p in record["learner"])
    print(f"duorl: start-up {end:6.1f} s  {what}; every phase of both processes in {path}", flush=True)


def check_mps_clients(mps: MpsSession, ctx: Any, sharing: Any, collector_pid: int,
                      collector_device: str) -> dict[str, Any]:
    """The duo's on_collector_ready: every rank's verdict on its two processes (StartRefused where one
    is not the daemon's client); the manifest's record of it."""
    v = mps.verify(os.getpid(), collector_pid, collector_device)
    verdicts = _gather_verdicts(ctx, v)
    if not all(x.ok for x in verdicts):
        bad = next(x for x in verdicts if not x.ok)
        raise StartRefused(bad.message if ctx is None else f"rank {bad.evidence.rank} ({bad.host}): {bad.message}")
    return {"cuda_process_sharing": mps_manifest(sharing, [x.evidence for x in verdicts], [x.host for x in verdicts])}


def _gather_verdicts(ctx: Any, verdict: MpsVerdict) -> list[MpsVerdict]:
    if ctx is None:
        return [verdict]
    return ctx.all_gather(verdict, "gathering the CUDA MPS client checks", group="startup")
