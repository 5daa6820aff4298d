"""Rows written one row late (runtime/deferred_rows.py) on the GPU (`pytest -m cuda`): taking a row queues
its device part without waiting, and the row read later holds the values of the moment it was taken."""

from __future__ import annotations

import time

import pytest
import torch

from duorl.runtime.deferred_rows import DeferredRows
from duorl.runtime.iteration_metrics import IterationMetrics
from duorl.runtime.timing import PhaseTimer

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]

SLEEP_CYCLES = 2_000_000_000  # about a second on a H100/H200 clock


def _metrics() -> IterationMetrics:
    m = IterationMetrics(8, 0, 4, (), time.perf_counter())
    m.add(10.0, 1.0, 0.5, None)
    return m


def test_taking_a_row_does_not_wait_and_keeps_its_values() -> None:
    torch.cuda.init()
    loss = torch.zeros((), device="cuda")
    rows, timer, metrics = DeferredRows(), PhaseTimer(torch.device("cuda")), _metrics()
    rows.queue(0, 0, 0.0, metrics.host_row(0, time.perf_counter()), timer.take(), {"Loss/x": loss})
    assert [r.metrics["Loss/x"] for r in rows.flush()] == [0.0]  # the first row allocates the pinned buffer
    metrics.add(10.0, 1.0, 0.5, None)
    with timer.phase("learner_train_ms"):
        torch.cuda._sleep(SLEEP_CYCLES)
        loss.fill_(1.5)  # lands after the sleep
    t0 = time.perf_counter()
    assert rows.queue(1, 32, 0.1, metrics.host_row(32, time.perf_counter()), timer.take(), {"Loss/x": loss}) == []
    took = time.perf_counter() - t0
    loss.fill_(7.0)  # the next update overwrites the learner's output; the row keeps its own copy
    metrics.add(10.0, 1.0, 0.5, None)
    (row,) = rows.queue(2, 64, 0.2, metrics.host_row(64, time.perf_counter()), timer.take(), {"Loss/x": loss})
    waited = time.perf_counter() - t0
    assert took < 0.3 < waited, (took, waited)  # the take queued behind the sleep; reading it waited for it
    assert (row.iteration, row.env_steps, row.metrics["Loss/x"]) == (1, 32, 1.5)
    assert row.metrics["Perf/learner_train_ms"] > 300.0  # the sleep, timed by the phase's events
    assert row.metrics["Perf/iteration_ms"] == 10.0
    (last,) = rows.flush()
    assert (last.iteration, last.metrics["Loss/x"]) == (2, 7.0)
    assert "Perf/learner_train_ms" not in last.metrics  # no phase ran in its span
    assert rows.flush() == []
