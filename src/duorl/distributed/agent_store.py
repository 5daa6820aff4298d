"""A client of the store torch's elastic agent runs for its workers (MASTER_ADDR:PORT,
`TORCHELASTIC_USE_AGENT_STORE`), where the ranks of every node say what the others must know before or
outside the process groups: the roll call (roll_call.py), the learners' heartbeats
(collective_wait.py), the failures (failure_board.py). Imports nothing of duorl: each of them uses it.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any


def agent_store(renv: Any, timeout_s: float, name: str = "roll_call") -> Any | None:
    """A client of the elastic agent's store, namespaced for this run's attempt and `name`; None without one."""
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        return None
    from torch.distributed import PrefixStore, TCPStore

    try:
        store = TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), renv.world_size, False,
                         timeout=timedelta(seconds=timeout_s))
    except (KeyError, ValueError, RuntimeError):
        return None
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    return PrefixStore(f"duorl/{renv.run_id}/{attempt}/{name}", store)
