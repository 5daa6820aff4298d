"""How a run ends: every exception the runtime knows, mapped once to a run status, the part that
failed and the command's exit code (docs/exit_codes.md).

| status | exit code | |
|---|---|---|
| completed, interrupted | 0 | a clean stop (a signal, a stop request) included |
| failed | 1 | the part that failed is named: collector, learner, peer rank, run directory, task |
| refused | 2 | input the run must not start with, found early or once both processes run |

`secondary`: the failure is only the echo of another process's (a peer rank lost in a collective):
its own error is elsewhere, and a better-informed survivor (the launcher) records the root cause.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from duorl.config.errors import InputRefused
from duorl.gpu.graphs import GraphCaptureError
from duorl.runtime.atomic_files import WriteFailed, write_json
from duorl.runtime.control import PeerDied, PhaseInterrupted, StopRequested
from duorl.runtime.coordination import RankLost
from duorl.runtime.task_finiteness import TaskNotFinite

EXIT_CODES = {"completed": 0, "interrupted": 0, "failed": 1, "refused": 2}
# statuses a run summary keeps once written: nothing overwrites them but a better-informed record
TERMINAL = frozenset(EXIT_CODES)


class StartRefused(InputRefused):
    """A check that needs both processes running (e.g. CUDA MPS clients) refused the run: it ends at
    once, as refused input rather than a failure during training."""


@dataclass(frozen=True)
class Outcome:
    status: str
    failed_part: str | None = None
    secondary: bool = False
    # the abandoned iteration is not saved: the last periodic checkpoint stays the run's
    keep_last_checkpoint: bool = False

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]


# most specific first: PeerStalled is a PeerDied, StartRefused an InputRefused, WriteFailed an OSError
_OUTCOMES: tuple[tuple[type[BaseException], Outcome], ...] = (
    (StopRequested, Outcome("interrupted")),
    (PhaseInterrupted, Outcome("interrupted", keep_last_checkpoint=True)),
    (KeyboardInterrupt, Outcome("interrupted")),
    (PeerDied, Outcome("failed", "collector")),
    (RankLost, Outcome("failed", "peer rank", secondary=True)),
    (StartRefused, Outcome("refused")),
    (InputRefused, Outcome("refused")),
    (GraphCaptureError, Outcome("failed", "learner (whole-cycle graph capture)")),
    (WriteFailed, Outcome("failed", "run directory")),
    # the task's values were NaN or inf most of the time: what it trained on is not worth a final checkpoint
    (TaskNotFinite, Outcome("failed", "task", keep_last_checkpoint=True)),
)


# what the duo's loop ends a run on (anything else there is a bug and propagates with its traceback)
LOOP_ENDINGS: tuple[type[BaseException], ...] = (StopRequested, PhaseInterrupted, KeyboardInterrupt, PeerDied,
                                                  RankLost, StartRefused, GraphCaptureError, WriteFailed,
                                                  TaskNotFinite)


def outcome_of(error: BaseException) -> Outcome | None:
    """The outcome a known exception stands for; None for one the runtime does not know (a bug: its
    traceback is the report)."""
    for kind, outcome in _OUTCOMES:
        if isinstance(error, kind):
            return outcome
    return None


def exit_code(status: str) -> int:
    return EXIT_CODES[status]


# what a run summary says before the run ended
OPEN_STATUSES = ("starting", "running")


def record_failure(path: Path, message: str, part: str, cause_known: bool = True, **fields: Any) -> bool:
    """Record in a run summary that the run failed (`part` named), for a process that outlives the one
    that would have (a collector whose learner froze or died, the launcher whose rank died). It writes
    over a summary that still says the run goes on, or over a failure recorded without its cause
    (`cause_known: false`: a peer rank's echo, a collector's guess); never over a run's own outcome.
    Leaves a missing or unreadable summary alone (the message is on stderr too); True if written."""
    try:
        summary = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if summary.get("status") not in OPEN_STATUSES and summary.get("cause_known", True):
        return False
    summary.update(status="failed", error=message, failed_part=part, **fields)  # fields: e.g. failed_rank
    if cause_known:
        summary.pop("cause_known", None)
    else:
        summary["cause_known"] = False
    try:
        write_json(path, summary, "run summary")
    except OSError:
        return False
    return True
