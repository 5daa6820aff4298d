"""How one duo agrees with the other ranks of a data-parallel run (docs/design.md §4), as seen by the loop.

The loop is the same at any world size. At every iteration boundary it asks the coordinator whether
to stop, so that every rank stops at the same boundary (a signal, a wall-time limit or a failed
check reaches one rank first); waits inside an iteration then never end on a local stop request. A
`Solo` coordinator (one process, no data parallel) agrees with itself and lets waits end at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class RankLost(RuntimeError):
    """A collective with the other ranks failed: a peer rank is gone (its own error names the cause)."""


@dataclass(frozen=True)
class StopVerdict:
    stop: bool  # every rank stops at this boundary
    wall_limited: bool  # because some rank reached training.max_wall_minutes


class RankCoordinator(Protocol):
    rank: int
    world_size: int
    # whether a stop request may end a wait on this rank alone (only without peers)
    local_stops: bool

    def agree_stop(self, stop_requested: bool, wall_limited: bool) -> StopVerdict:
        """Called by every rank at every iteration boundary, in step."""

    def barrier(self, what: str) -> None:
        """Every rank reaches this point (e.g. 'every collector built its env') before any goes on."""

    def agree_capture(self, problem: str | None) -> None:
        """Before and after every whole-cycle graph capture: raises GraphCaptureError on every rank when
        any rank reports a problem (no rank replays or falls back to eager alone)."""


@dataclass
class Solo:
    """The coordinator of a run without data parallel."""

    rank: int = 0
    world_size: int = 1
    local_stops: bool = True

    def agree_stop(self, stop_requested: bool, wall_limited: bool) -> StopVerdict:
        return StopVerdict(stop_requested or wall_limited, wall_limited)

    def barrier(self, what: str) -> None:
        return None

    def agree_capture(self, problem: str | None) -> None:
        return None  # alone, the capture's own error is the run's
