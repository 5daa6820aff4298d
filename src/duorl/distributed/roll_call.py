"""Before a rank joins the process groups, every rank says whether it can start (docs/design.md §4).

A rank that refuses its input before joining (a `training.devices` list that does not fit its node, a
bad key on one host) would otherwise leave its peers waiting inside `init_process_group` for
`training.dp_startup_timeout_s` (30 minutes), silent and deaf to SIGTERM. Instead each rank writes
its verdict into the store torch's elastic agent already runs for the workers (MASTER_ADDR:PORT,
`TORCHELASTIC_USE_AGENT_STORE`) and waits, polling, for every other rank's: one refusal ends every
rank at once with the refusing rank's message (exit code 2, on every node). The wait says whom it
waits for, and a stop request ends it (a rank that never starts cannot be waited for in silence).

Without an agent's store (a hand-made env:// launch) the ranks join as before.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from typing import Any

from duorl.config.errors import InputRefused
from duorl.distributed.agent_store import agent_store
from duorl.distributed.launch import RankEnv


class RankRefusal(InputRefused):
    """A check every rank ran refused the run on some rank (exit code 2 on all of them)."""


class StoppedBeforeStart(Exception):
    """A stop request arrived while the ranks were still gathering: nothing was written."""


def roll_call(renv: RankEnv, problem: str | None, timeout_s: float, report_every_s: float = 30.0) -> None:
    """Report this rank's verdict (None: ready) and wait for every rank's. Raises RankRefusal with the
    first refusing rank's message, StoppedBeforeStart on a stop request, or returns when all are ready
    (at once, without an agent's store: the old way, where init_process_group waits)."""
    from duorl.runtime.stop_signals import STOP_REQUEST

    store = agent_store(renv, timeout_s)
    if store is None:
        if problem is not None:
            raise InputRefused(problem)
        return
    host = platform.node()
    store.set(f"rank{renv.rank}", json.dumps({"problem": problem, "host": host, "pid": os.getpid()}))
    if problem is not None:
        raise RankRefusal(f"rank {renv.rank} ({host}): {problem}")
    start = time.monotonic()
    next_report = start + report_every_s
    seen: dict[int, dict[str, Any]] = {}
    while True:
        decided = _decision(store)
        if decided is not None:
            _follow(decided)
            return
        for r in range(renv.world_size):
            if r not in seen and store.check([f"rank{r}"]):
                seen[r] = json.loads(store.get(f"rank{r}"))
        refused = sorted(r for r, v in seen.items() if v["problem"] is not None)
        if refused:
            first = seen[refused[0]]
            more = f" (and ranks {', '.join(map(str, refused[1:]))})" if len(refused) > 1 else ""
            raise RankRefusal(f"rank {refused[0]} ({first['host']}){more}: {first['problem']}")
        # whether the ranks join or stop is decided once, by whichever rank decides first (compare-and-
        # set): a rank never leaves while another, having seen everyone ready, joins and waits for it
        if len(seen) == renv.world_size:
            _follow(_decide(store, "go"))
            return
        if STOP_REQUEST.signal is not None:
            _follow(_decide(store, "stop"))
            return
        now = time.monotonic()
        if now - start > timeout_s:
            missing = [r for r in range(renv.world_size) if r not in seen]
            raise InputRefused(f"rank(s) {missing} did not start within training.dp_startup_timeout_s={timeout_s:g} s "
                               "(their node's output says why). Fix: start every node with the same command")
        if now >= next_report and renv.local_rank == 0:
            missing = [r for r in range(renv.world_size) if r not in seen]
            print(f"duorl: rank {renv.rank} ({host}) waits for rank(s) {', '.join(map(str, missing))} to start, "
                  f"{now - start:.0f} s so far", file=sys.stderr, flush=True)
            next_report = now + report_every_s
        time.sleep(0.2)


def _decision(store: Any) -> str | None:
    return store.get("decision").decode() if store.check(["decision"]) else None


def _decide(store: Any, proposal: str) -> str:
    """The run's decision: `proposal` if no rank decided before, else that rank's decision."""
    return store.compare_set("decision", "", proposal).decode()


def _follow(decision: str) -> None:
    if decision == "stop":
        raise StoppedBeforeStart()
