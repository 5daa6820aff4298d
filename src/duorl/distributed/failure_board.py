"""Every rank's failure record, where every other node reads it (docs/design.md §4).

torchelastic's error file stays on the failing rank's host: under `torchrun` on several nodes, rank 0
(which writes the run summary) only sees its peer's connection close ("lost a peer rank ... Connection
reset by peer"). So a rank that fails and can still say why also writes its record into the store the
elastic agents already run for the workers (as the roll call does, distributed/roll_call.py): the part
that failed, its pid, the signal that killed it and its last phase where the message names them. Rank 0,
having lost a peer, reads the records and names the rank that failed first; a rank waiting to join the
process groups reads them too and leaves at once instead of waiting `training.dp_startup_timeout_s`.

Without an agent's store (a hand-made env:// launch) nothing is posted and nothing is found.
"""

from __future__ import annotations

import json
import os
import platform
import re
import sys
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable

# a post or a read never holds a failing rank longer than this (the store may be gone with its agent)
STORE_TIMEOUT_S = 3.0
# how long a rank that lost a peer waits for that peer's record (a record is written before the rank exits,
# and its connection closes with the exit: it is there at once, unless the rank could not write it)
CAUSE_WAIT_S = 2.0


@dataclass(frozen=True)
class FailureRecord:
    """One rank's failure: `part` (learner, collector, input, ...), the pid of the process that failed,
    the signal that killed it and its last phase (None where the message does not say), `secondary`
    when the rank failed only because it lost a peer, and its exit code."""

    rank: int
    host: str
    message: str
    part: str
    pid: int
    secondary: bool = False
    signal: str | None = None
    phase: str | None = None
    exit_code: int = 1

    @classmethod
    def of(cls, rank: int, message: str, part: str, secondary: bool = False) -> "FailureRecord":
        """The record of `message`, its pid, signal and phase read from duorl's own wording ("collector (pid
        4242) was killed by signal 9 in phase 'waiting for weights'"); the pid is this process's otherwise."""
        pid = re.search(r"\(pid (\d+)\)", message)
        sig = re.search(r"killed by signal (\w+)", message)
        phase = re.search(r"in phase '([^']+)'", message)
        return cls(rank=rank, host=platform.node(), message=message, part=part,
                   pid=int(pid.group(1)) if pid else os.getpid(), secondary=secondary,
                   signal=_signal_name(sig.group(1)) if sig else None, phase=phase.group(1) if phase else None,
                   exit_code=2 if part == "input" else 1)

    def summary_fields(self) -> dict[str, Any]:
        """What run_summary.json records of it."""
        out: dict[str, Any] = {"error": self.message, "failed_part": self.part, "failed_rank": self.rank,
                               "failed_pid": self.pid}
        if self.signal is not None:
            out["failed_signal"] = self.signal
        if self.phase is not None:
            out["failed_phase"] = self.phase
        return out


def _signal_name(text: str) -> str:
    import signal

    try:
        return signal.Signals(int(text)).name if text.isdigit() else signal.Signals[text].name
    except (KeyError, ValueError):
        return text


def _board(renv: Any, timeout_s: float = STORE_TIMEOUT_S) -> Any | None:
    from duorl.distributed.agent_store import agent_store

    try:
        return agent_store(renv, timeout_s, "failures")
    except Exception:  # noqa: BLE001 - the agent (and its store) may be gone: the record stays on stderr
        return None


def post(renv: Any, record: FailureRecord) -> bool:
    """Write this rank's record (the first one a rank writes stays: a rank's later echo does not replace
    its cause); True if the board took it."""
    store = _board(renv)
    if store is None:
        return False
    try:
        store.compare_set(f"rank{record.rank}", "", json.dumps(asdict(record)))
    except Exception:  # noqa: BLE001
        return False
    return True


def read(renv: Any, store: Any = None) -> list[FailureRecord]:
    """Every other rank's record posted so far, in rank order."""
    store = store if store is not None else _board(renv)
    if store is None:
        return []
    out = []
    for r in range(renv.world_size):
        if r == renv.rank:
            continue
        try:
            if store.check([f"rank{r}"]):
                out.append(FailureRecord(**json.loads(store.get(f"rank{r}"))))
        except Exception:  # noqa: BLE001 - the store went away mid-read
            break
    return out


def root_cause(renv: Any, wait_s: float = CAUSE_WAIT_S) -> FailureRecord | None:
    """The first other rank's own failure (not an echo of a lost peer), waiting up to `wait_s` for one;
    None if no rank could record one."""
    store = _board(renv)
    if store is None:
        return None
    deadline = time.monotonic() + wait_s
    while True:
        own = [f for f in read(renv, store) if not f.secondary]
        if own:
            return own[0]
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.1)


def watch(renv: Any, on_failure: Callable[[FailureRecord], None], every_s: float = 0.5) -> threading.Event:
    """Call `on_failure` (from a thread) with the first other rank's own failure posted while this rank
    waits in something that cannot watch for it itself (joining the process groups); set the returned
    event to stop watching."""
    done = threading.Event()
    store = _board(renv)
    if store is None:
        return done

    def run() -> None:
        while not done.wait(every_s):
            own = [f for f in read(renv, store) if not f.secondary]
            if own:
                on_failure(own[0])
                return

    threading.Thread(target=run, name="duorl-failure-watch", daemon=True).start()
    return done


def name_the_cause(renv: Any, host: str, echo: str) -> FailureRecord | None:
    """After this rank lost a peer: that peer's own failure said first (where it ran on another node: a
    rank of this node said it here already), then this rank's echo, once per node (its first local rank);
    the echo alone, and None, when no rank could record a cause."""
    cause = root_cause(renv)
    if renv.local_rank == 0:
        if cause is not None:
            # torchrun numbers the ranks node by node: ranks r and r' share a node when r // n == r' // n
            same_node = cause.rank // renv.local_world_size == renv.rank // renv.local_world_size
            prefix = "error" if cause.part == "input" else "duorl: error"
            if not same_node:
                print(f"{prefix}: {cause.message}", file=sys.stderr, flush=True)
            print(f"duorl: rank {renv.rank} ({host}) stopped because rank {cause.rank} failed ({echo})",
                  file=sys.stderr, flush=True)
        else:
            print(f"duorl: {echo}", file=sys.stderr, flush=True)
    return cause


def summary_fields(renv: Any, message: str, part: str, cause: FailureRecord | None) -> dict[str, Any]:
    """What rank 0's run_summary.json says of a failure: the cause (the failing rank, its part, pid,
    signal and phase), rank 0's own (`cause` None, `part` not a lost peer), or, when the failing rank
    could record nothing, the lost peer with `cause_known: false` (a launcher that knows better replaces it)."""
    if cause is not None:
        return cause.summary_fields()
    if part == "peer rank":
        return {"error": message, "failed_part": part, "cause_known": False}
    return FailureRecord.of(renv.rank, message, part).summary_fields()


def leave_for(record: FailureRecord, renv: Any) -> None:
    """A rank that cannot go on because another rank failed before the groups were joined: one line (its
    node's first local rank) naming that rank, and the failing rank's exit code, at once."""
    if renv.local_rank == 0:
        prefix = "error" if record.part == "input" else "duorl: error"
        print(f"{prefix}: {record.message}", file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(record.exit_code)
