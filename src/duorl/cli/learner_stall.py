"""What a collector records about its learner: before it ends a frozen learner, the run summary (rank 0)
says the run failed and why, and a data-parallel rank also writes torchelastic's error file, so the
launcher names the rank, the learner and why; when its learner died without a word, the summary must not
stay `running`.

Its own module, importing nothing at the top: the recorder is pickled into the spawned collector by
reference, and unpickling imports the module that holds it. In cli/train.py it made every collector
import the CLI's configuration stack (OmegaConf, validation, MPS) before building its env
(benchmarks/2026-12-02_startup_cpu/).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any


def stall_recorder(ctx: Any, run_dir: Path | None) -> Any:
    """The callable for DuoSettings.on_learner_stalled: `ctx` the rank's DistContext (None alone),
    `run_dir` the run directory on rank 0 (None elsewhere)."""
    summary = str(run_dir / "run_summary.json") if run_dir is not None else None
    if ctx is None:
        return functools.partial(record_learner_stall, None, "", summary)
    return functools.partial(record_learner_stall, ctx.rank, ctx.host, summary)


def record_learner_stall(rank: int | None, host: str, summary: str | None, message: str) -> None:
    """In the collector process (pickled by reference: module-level)."""
    if rank is not None:
        from duorl.distributed.launch import record_rank_failure

        message = f"rank {rank} ({host}): {message}"
        record_rank_failure(message, "learner")
    if summary is not None:
        from duorl.runtime.outcome import record_failure

        record_failure(Path(summary), message, "learner")


def gone_recorder(run_dir: Path | None) -> Any:
    """The callable for DuoSettings.on_learner_gone: what the collector calls when its learner died
    without a word. The cause is a guess (a signal, the OOM killer): a launcher that knows better (the
    learner's exit status) replaces it."""
    if run_dir is None:
        return None
    return functools.partial(record_learner_gone, str(run_dir / "run_summary.json"))


def record_learner_gone(summary: str, message: str) -> None:
    """In the collector process (pickled by reference: module-level)."""
    from duorl.runtime.outcome import record_failure

    record_failure(Path(summary), message, "learner", cause_known=False)
