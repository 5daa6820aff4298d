"""The weight board's event mode on the GPU (`pytest -m cuda`): the reader's stream waits for the copy.

A publisher process queues a long GPU sleep, then the publish (its copy waits behind the sleep on the
stream), and announces the version at once, without a host sync. A reader in another process loads the
version as soon as it is announced. With the slot's interprocess event the reader gets the new weights;
without the event (the control: no event, no sync) it reads the slot before the copy lands, which shows
that the test can see the hazard the event closes (the reader reports CUDA up before the sleep starts). Then a
whole run trains with DUORL_WEIGHT_PUBLISH=event. The mode's rules (CUDA only, bad values) are CPU tests:
tests/runtime/test_weights.py.
"""

from __future__ import annotations

import json
import time

import pytest
import torch
import torch.multiprocessing as mp
from torch import nn

from duorl.runtime.weights import WeightBoard
from tests.conftest import run_duorl

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]

SLEEP_CYCLES = 2_000_000_000  # about a second on a H100/H200 clock: far longer than the reader's load


def _net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.LayerNorm(32))


def _reader(board: WeightBoard, ready, version, results) -> None:
    try:
        torch.cuda.set_device(0)
        net = _net().cuda()
        torch.cuda.synchronize()
        ready.value = 1  # CUDA is up here: the publisher starts its sleep only now
        while version.value < 1:
            pass
        board.load_into(net, 1)
        torch.cuda.synchronize()
        # numpy arrays travel by value: a tensor would travel as a file descriptor, gone with this process
        results.put(("ok", [t.cpu().numpy() for t in net.state_dict().values()]))
    except BaseException as e:  # shipped back: the test names it
        results.put(("error", repr(e)))


def _publish_behind_a_sleep(mode: str) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """(what was published, what the reader loaded)"""
    ctx = mp.get_context("spawn")
    device = torch.device("cuda", 0)
    src = _net().to(device)
    board = WeightBoard.allocate(src, device, mode)
    board.publish(src, 1)  # version 1's slot holds the initial weights
    torch.cuda.synchronize()
    ready, version, results = ctx.Value("i", 0), ctx.Value("i", 0), ctx.Queue()
    reader = ctx.Process(target=_reader, args=(board, ready, version, results), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 120
        while ready.value < 1:
            assert reader.is_alive() and time.monotonic() < deadline, "the reader did not start"
            time.sleep(0.01)
        torch.cuda._sleep(SLEEP_CYCLES)
        with torch.no_grad():
            for p in src.parameters():
                p.add_(1.0)  # queued behind the sleep
        board.publish(src, 1)  # so is the copy (and, in event mode, its record)
        version.value = 1  # announced at once: no host sync
        status, payload = results.get(timeout=120)
        reader.join(timeout=60)
    finally:
        if reader.is_alive():
            reader.kill()
            reader.join(timeout=10)
    assert not reader.is_alive()
    assert status == "ok", payload
    torch.cuda.synchronize()
    return [t.cpu() for t in src.state_dict().values()], [torch.from_numpy(a) for a in payload]


def test_the_reader_waits_for_the_copy_with_events() -> None:
    published, loaded = _publish_behind_a_sleep("event")
    for a, b in zip(published, loaded):
        assert torch.equal(a, b)


def test_without_events_or_a_sync_the_reader_reads_the_old_slot() -> None:
    """The control: the same order without the event loads the weights from before the copy."""
    published, loaded = _publish_behind_a_sleep("sync")
    assert not all(torch.equal(a, b) for a, b in zip(published, loaded))


def test_a_run_publishes_with_events(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DUORL_WEIGHT_PUBLISH", "event")
    run = tmp_path / "run"
    # a row every iteration (the default), each written one row late (runtime/deferred_rows.py); the checkpoints
    # every 15 iterations write the row in flight first
    p = run_duorl(run, "training.devices=[0]", "algo.max_iterations=40", "training.num_envs=64",
                  "training.log_interval=1", "algo.save_interval=15", sim="mjwarp")
    assert p.returncode == 0, p.stderr
    assert json.loads((run / "run_summary.json").read_text())["runtime_manifest"]["weight_publish"] == "event"
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in rows] == list(range(1, 41))
    trained = [r for r in rows if "Loss/critic" in r]
    assert trained, rows[-1]
    assert all(torch.isfinite(torch.tensor(r["Loss/critic"])) for r in trained)
    assert all(r["Perf/learner_train_ms"] > 0 for r in trained)
    assert trained[-1]["Train/skipped_updates"] == 0
