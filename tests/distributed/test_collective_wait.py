"""distributed/collective_wait.RankBeats against a real TCPStore (the elastic agent's store stands in): a
rank's heartbeat is in the store from the duo's start, so a peer that waits for it can name it even when it
froze in its first second (the full fault matrix's frozen-rank case found it unnamed)."""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass
from datetime import timedelta

import pytest
from torch.distributed import TCPStore

import duorl.distributed.collective_wait as collective_wait
from duorl.distributed.collective_wait import RankBeats


@dataclass
class _Rank:
    rank: int
    world_size: int = 2
    run_id: str = "beats-test"


class _Beat:
    current = "training"

    def age_s(self) -> float:
        return 0.0


@pytest.fixture
def agent_store_env(monkeypatch):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = TCPStore("127.0.0.1", port, 2, True, timeout=timedelta(seconds=10), wait_for_workers=False)
    for key, value in {"TORCHELASTIC_USE_AGENT_STORE": "True", "MASTER_ADDR": "127.0.0.1",
                       "MASTER_PORT": str(port)}.items():
        monkeypatch.setenv(key, value)
    yield server
    del server


def test_a_rank_frozen_right_after_its_start_is_named_by_its_waiting_peer(agent_store_env, monkeypatch) -> None:
    monkeypatch.setattr(collective_wait, "PUBLISH_EVERY_S", 0.5)  # late after 3 x 0.5 s
    frozen, waiting = RankBeats(_Rank(1), "node-b"), RankBeats(_Rank(0), "node-a")
    frozen.start(_Beat(), timeout_s=10)
    frozen.stop()  # "frozen" before its first period: it publishes nothing after its first row
    waiting.start(_Beat(), timeout_s=10)
    try:
        assert waiting.late() is None  # fresh: not late yet
        time.sleep(1.8)
        late = waiting.late()
        assert late is not None and late[0] == 1, late
        assert late[1].startswith("rank 1 (node-b), whose learner (pid ") and "stopped beating" in late[1]
    finally:
        waiting.stop()
