"""The failure board (distributed/failure_board.py) over a real TCPStore in this process, and a rank's
device check before its roll call (distributed/launch.check_rank_entry): issue #39, faults 1 and 2.
The same paths with real torchrun nodes are in test_dp_fault_causes.py."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from torch.distributed import TCPStore

from duorl.config.errors import ConfigError
from duorl.distributed import failure_board
from duorl.distributed.launch import check_rank_entry, rank_env, record_rank_failure
from tests.distributed.conftest import free_port

KILLED = "rank 1 (vm): collector (pid 4242) was killed by signal 9 in phase 'waiting for weights' while the learner waited"


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> TCPStore:
    """An agent's store, and this process as rank 1 of 2 of run 'test' (torchrun's environment)."""
    port = free_port()
    server = TCPStore("127.0.0.1", port, 2, True, timeout=timedelta(seconds=5), wait_for_workers=False)
    for k, v in {"TORCHELASTIC_USE_AGENT_STORE": "True", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
                 "RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
                 "TORCHELASTIC_RUN_ID": "test"}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("TORCHELASTIC_ERROR_FILE", raising=False)
    return server


def _as_rank(monkeypatch: pytest.MonkeyPatch, rank: int):
    monkeypatch.setenv("RANK", str(rank))
    renv = rank_env()
    assert renv is not None and renv.rank == rank
    return renv


def test_a_rank_s_record_reaches_rank_0_with_its_part_pid_signal_and_phase(store, monkeypatch) -> None:
    record_rank_failure(KILLED, "collector")
    record_rank_failure("rank 1 (vm): a later echo", "peer rank", secondary=True)  # the first record stays
    cause = failure_board.root_cause(_as_rank(monkeypatch, 0), wait_s=0)
    assert cause is not None and cause.rank == 1 and cause.part == "collector"
    assert (cause.pid, cause.signal, cause.phase) == (4242, "SIGKILL", "waiting for weights")
    fields = failure_board.summary_fields(_as_rank(monkeypatch, 0), "rank 0 (vm): lost a peer rank", "peer rank", cause)
    assert fields["failed_rank"] == 1 and fields["failed_part"] == "collector" and fields["error"] == KILLED
    assert fields["failed_signal"] == "SIGKILL" and fields["failed_phase"] == "waiting for weights"
    assert "cause_known" not in fields


def test_an_echo_is_no_cause_and_a_lost_peer_without_one_says_so(store, monkeypatch) -> None:
    # rank 1 repeating rank 0's refusal (every rank refuses together) is rank 0's echo, not rank 1's cause
    record_rank_failure("rank 0 (vm): training.log_dir=x: exists", "input")
    renv0 = _as_rank(monkeypatch, 0)
    t0 = time.monotonic()
    assert failure_board.root_cause(renv0, wait_s=0.3) is None
    assert time.monotonic() - t0 < 2
    fields = failure_board.summary_fields(renv0, "rank 0 (vm): lost a peer rank", "peer rank", None)
    assert fields == {"error": "rank 0 (vm): lost a peer rank", "failed_part": "peer rank", "cause_known": False}
    own = failure_board.summary_fields(renv0, "rank 0 (vm): the learner (pid 7) failed", "learner", None)
    assert own["failed_rank"] == 0 and own["failed_pid"] == 7


def test_a_message_without_a_rank_is_named_by_the_rank_that_posts_it(store, monkeypatch) -> None:
    record_rank_failure("training.devices=[7]: no CUDA device visible", "input")
    cause = failure_board.root_cause(_as_rank(monkeypatch, 0), wait_s=0)
    assert cause is not None and cause.message.startswith("rank 1 (") and cause.exit_code == 2


def test_a_rank_waiting_to_join_hears_of_another_rank_s_failure_at_once(store, monkeypatch) -> None:
    renv0 = _as_rank(monkeypatch, 0)
    heard: list[failure_board.FailureRecord] = []
    got = threading.Event()
    done = failure_board.watch(renv0, lambda f: (heard.append(f), got.set()), every_s=0.05)
    try:
        monkeypatch.setenv("RANK", "1")
        t0 = time.monotonic()
        record_rank_failure(KILLED, "collector")
        assert got.wait(5) and time.monotonic() - t0 < 2
        assert heard[0].rank == 1 and heard[0].part == "collector"
    finally:
        done.set()


def test_without_an_agent_s_store_nothing_is_posted_or_found(monkeypatch) -> None:
    monkeypatch.delenv("TORCHELASTIC_USE_AGENT_STORE", raising=False)
    for k, v in {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0"}.items():
        monkeypatch.setenv(k, v)
    renv = rank_env()
    assert not failure_board.post(renv, failure_board.FailureRecord.of(0, "x", "learner"))
    assert failure_board.root_cause(renv, wait_s=0) is None


def test_a_rank_s_device_entry_gets_plain_train_s_check_before_it_narrows(monkeypatch) -> None:
    """Issue #39 fault 1: `training.devices=[7]` passed on a torchrun node (narrowed, it read cuda:0) and
    died in init_process_group; plain `duorl train` refuses it. Both now give the same ConfigError."""
    import torch

    from duorl.cli.configure import load_config

    if torch.cuda.is_available():
        pytest.skip("the CPU build's case: no CUDA device here")
    args = ("sac", "pendulum_swingup", "mujoco", ["training.devices=[7]"])
    with pytest.raises(ConfigError) as plain:
        load_config(*args)
    shape = load_config(*args, probe_devices=False)
    with pytest.raises(ConfigError) as ranked:
        check_rank_entry(shape, 7)
    assert str(ranked.value) == str(plain.value) and "training.devices" in str(ranked.value)
    check_rank_entry(shape, "cpu")  # the CPU is always there


def test_a_clean_rank_removes_its_agent_s_empty_tree_and_nothing_else(tmp_path) -> None:
    """Issue #39 fault 6: every torchrun agent left an empty /tmp/torchelastic_*/<run>/attempt_0/{0,1}."""
    import os
    import tempfile
    from pathlib import Path

    from duorl.distributed.launch import leave_no_elastic_tree

    top = Path(tempfile.mkdtemp(prefix="torchelastic_"))
    attempt = top / "none_abc" / "attempt_0"
    for r in ("0", "1"):
        (attempt / r).mkdir(parents=True)
    try:
        leave_no_elastic_tree({"TORCHELASTIC_ERROR_FILE": str(attempt / "0" / "error.json")})
        assert not (attempt / "0").exists() and (attempt / "1").is_dir()  # rank 1's folder, still in use, stays
        leave_no_elastic_tree({"TORCHELASTIC_ERROR_FILE": str(attempt / "1" / "error.json")})
        assert not top.exists()  # the last clean rank took the whole tree
        # a failed rank's error file stays for its agent to read, and so does the tree holding it
        (attempt / "0").mkdir(parents=True)
        (attempt / "0" / "error.json").write_text("{}")
        leave_no_elastic_tree({"TORCHELASTIC_ERROR_FILE": str(attempt / "0" / "error.json")})
        assert (attempt / "0" / "error.json").is_file()
        # a tree the user named (torchrun --log-dir) is theirs
        mine = tmp_path / "logs" / "run" / "attempt_0" / "0"
        mine.mkdir(parents=True)
        leave_no_elastic_tree({"TORCHELASTIC_ERROR_FILE": str(mine / "error.json")})
        assert mine.is_dir()
        leave_no_elastic_tree({})  # not a rank: nothing to do
    finally:
        import shutil

        shutil.rmtree(top, ignore_errors=True)
    assert os.path.isdir(tempfile.gettempdir())
