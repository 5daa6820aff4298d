"""Heartbeats and stall bounds (runtime/heartbeat.py), in one process with a fake clock; the real
processes are in test_faults.py."""

from __future__ import annotations

import time

import pytest

from duorl.runtime.control import (
    COLLECTOR_BEAT_NS,
    COLLECTOR_PHASE,
    COLLECTOR_STEADY_US,
    LEARNER_BEAT_NS,
    LEARNER_STEADY_US,
    TICKS_WRITTEN,
    ControlBlock,
    PeerStalled,
    wait_until,
)
from duorl.runtime.heartbeat import LONG_PHASES, PHASES, Heartbeat, PeerWatch, StallBounds, known_phase

S = 1_000_000_000  # ns


class Clock:
    def __init__(self) -> None:
        self.t = 1000 * S

    def __call__(self) -> int:
        return self.t


def _pair(bounds: StallBounds = StallBounds(steady_s=10, long_s=100, report_every_s=5)) -> tuple[ControlBlock, Heartbeat, Heartbeat, PeerWatch, Clock, list[str]]:
    control = ControlBlock.allocate()
    learner, collector = Heartbeat(control, "learner", bounds), Heartbeat(control, "collector", bounds)
    clock, lines = Clock(), []
    watch = PeerWatch(control, learner, 4242, bounds, clock=clock, report=lines.append)
    return control, learner, collector, watch, clock, lines


def _beat_at(control: ControlBlock, side: str, t: int) -> None:
    slot = {"learner": LEARNER_BEAT_NS, "collector": COLLECTOR_BEAT_NS}[side]
    control.counters[slot] = t


def test_a_peer_is_stalled_only_past_its_phases_bound() -> None:
    control, _, collector, watch, clock, _ = _pair()
    collector.phase("stepping")
    _beat_at(control, "collector", clock.t)
    clock.t += 9 * S
    assert watch.stall() is None
    clock.t += 2 * S
    why = watch.stall()
    assert why is not None and "the collector (pid 4242) made no progress for 11.0 s in phase 'stepping'" in why
    assert "bound 10 s: training.stall_timeout_s" in why and "0 ticks written" in why
    # the same silence in a long phase is within its own, longer bound
    control.counters[COLLECTOR_PHASE] = PHASES["collector"].index("building env")
    assert watch.stall() is None
    clock.t += 100 * S
    assert "training.stall_compile_timeout_s" in (watch.stall() or "")


def test_a_peer_that_never_beat_is_judged_from_the_watch_start() -> None:
    control, _, _, watch, clock, _ = _pair()
    assert watch.peer_phase() == "starting" and "starting" in LONG_PHASES
    clock.t += 99 * S
    assert watch.stall() is None
    clock.t += 2 * S
    assert "in phase 'starting'" in (watch.stall() or "")


def test_the_steady_bound_grows_with_the_peers_measured_phases() -> None:
    control, _, _, watch, _, _ = _pair()
    assert watch.bound_s("stepping") == 10
    control.counters[COLLECTOR_STEADY_US] = 1_000_000  # a 1 s steady phase measured by the collector
    assert watch.bound_s("stepping") == 50  # 50 x, above training.stall_timeout_s
    assert watch.bound_s("building env") == 100  # long phases keep their bound
    assert watch.bound_s("stopped") == float("inf")


def test_a_heartbeat_measures_its_longest_busy_steady_phase(monkeypatch: pytest.MonkeyPatch) -> None:
    control = ControlBlock.allocate()
    now = [10 * S]
    monkeypatch.setattr("duorl.runtime.heartbeat.time.monotonic_ns", lambda: now[0])
    beat = Heartbeat(control, "learner")
    beat.phase("training")
    now[0] += S // 4
    beat.phase("publishing weights")  # training took 0.25 s
    now[0] += S // 100
    beat.phase("waiting for the collector")  # publishing took 10 ms
    now[0] += 60 * S
    beat.phase("compiling or capturing")  # a wait is no work
    now[0] += 300 * S
    beat.phase("training")  # nor is a long phase
    assert int(control.counters[LEARNER_STEADY_US]) == 250_000
    assert int(control.counters[LEARNER_BEAT_NS]) == now[0] and beat.current == "training"


def test_a_data_parallel_learner_gets_more_time_from_its_collector() -> None:
    control = ControlBlock.allocate()
    bounds = StallBounds(steady_s=10, long_s=100, peer_factor=2.0)
    collector = Heartbeat(control, "collector", bounds)
    watch = PeerWatch(control, collector, 1, bounds)
    assert watch.bound_s("training") == 20
    assert watch.bound_s("waiting for the other ranks") == 100
    learner_side = PeerWatch(control, Heartbeat(control, "learner", bounds), 2, bounds)
    assert learner_side.bound_s("stepping") == 10  # the factor is for the learner only


def test_waiting_beats_reports_and_raises_on_a_stall() -> None:
    control, learner, collector, watch, clock, lines = _pair()
    collector.phase("stepping")
    _beat_at(control, "collector", clock.t)
    polls = []

    def ready() -> bool:
        polls.append(clock.t)
        clock.t += S  # each poll: a second later
        return False

    with pytest.raises(PeerStalled) as e:
        wait_until(ready, lambda: None, "the learner waited for ticks < 8 (iteration 4)", watch=watch)
    assert "made no progress for 11.0 s in phase 'stepping'" in str(e.value)
    assert str(e.value).endswith("while the learner waited for ticks < 8 (iteration 4)")
    assert watch.peer_stalled and learner.current == "waiting for the collector"
    # the peer never beat again: named once (not every report_every_s) as frozen in its phase, with its bound
    assert len(lines) == 1 and "the learner waits for ticks < 8 (iteration 4)" in lines[0], lines
    assert "the collector (pid 4242) stopped beating 5.0 s ago in phase 'stepping'" in lines[0], lines
    assert "frozen or stopped" in lines[0] and "stall bound (10 s)" in lines[0], lines


def test_a_beating_peer_is_reported_each_interval_a_silent_one_once_as_frozen() -> None:
    """Issue #39: a SIGSTOPped learner 'waiting for the collector' beside "the collector waits for
    weights" read like a deadlock, every interval. A waiting process beats: one that does not is frozen."""
    control, _, collector, watch, clock, lines = _pair()
    collector.phase("waiting for weights")
    watch.enter()

    def poll_for(seconds: int, beating: bool) -> None:
        for _ in range(seconds):
            clock.t += S
            if beating:
                _beat_at(control, "collector", clock.t)
            watch.poll("the learner waited for ticks < 8 (iteration 4)")

    poll_for(10, beating=True)
    assert len(lines) == 2 and all("is in phase 'waiting for weights', last heartbeat 0.0 s ago" in x for x in lines)
    lines.clear()
    poll_for(9, beating=False)  # below its 10 s bound: reported at 15 s (silent 5 s), not again at 20 s (silent 9 s)
    assert len(lines) == 1 and "stopped beating 5.0 s ago in phase 'waiting for weights'" in lines[0], lines
    lines.clear()
    poll_for(5, beating=True)  # it beats again: back to the plain report
    assert len(lines) == 1 and "is in phase 'waiting for weights'" in lines[0], lines
    lines.clear()
    collector.phase("building env")  # a long phase goes minutes without a beat: no word of freezing
    poll_for(30, beating=False)
    assert lines and not any("stopped beating" in x for x in lines), lines


def test_a_ready_peer_ends_the_wait_without_a_report() -> None:
    control, _, collector, watch, clock, lines = _pair()
    collector.phase("stepping")
    control.set(TICKS_WRITTEN, 8)
    assert wait_until(lambda: control.get(TICKS_WRITTEN) >= 8, lambda: None, "x", watch=watch) >= 0
    assert lines == []


def test_a_held_phase_lingers_alive(monkeypatch: pytest.MonkeyPatch) -> None:
    control = ControlBlock.allocate()
    slept: list[float] = []
    clock = [0.0]
    monkeypatch.setattr("duorl.runtime.heartbeat.time.sleep", lambda s: (slept.append(s), clock.__setitem__(0, clock[0] + s)))
    monkeypatch.setattr("duorl.runtime.heartbeat.time.monotonic", lambda: clock[0])
    beat = Heartbeat(control, "learner", StallBounds(slow_phase="learner:writing a checkpoint", slow_phase_s=1.0))
    beat.phase("training")
    assert slept == []
    beat.phase("writing a checkpoint")
    assert 19 <= len(slept) <= 21 and max(slept) <= 0.05  # a beat every 50 ms


def test_phase_names_for_the_fault_hook() -> None:
    assert known_phase("learner:writing a checkpoint") and known_phase("collector:building env")
    assert not known_phase("learner:building env") and not known_phase("gpu:stepping") and not known_phase("x")


def test_a_wait_without_spinning_leaves_the_core_to_the_peer() -> None:
    """spin=False (CPU processes, whose peer computes on the same cores) sleeps between polls from the
    first one: a 0.3 s wait costs this process under 5% of a core (measured 2%; spinning first: 10%)."""
    deadline = time.perf_counter() + 0.3
    cpu0 = time.process_time()
    waited = wait_until(lambda: time.perf_counter() >= deadline, lambda: None, "a test wait", spin=False)
    cpu = time.process_time() - cpu0
    assert waited >= 0.29
    assert cpu < 0.05 * waited, f"{cpu:.3f} s of CPU in a {waited:.3f} s wait"
