"""The start-up timeline (duorl/startup_phases.py): phases, counters, the console line and startup.json's form."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from duorl.startup_phases import Phase, StartupTimeline, console_line, describe, merged_record, process_start_time


def test_a_process_start_is_read_from_the_kernel() -> None:
    """A child started now started after this test began and before it ended (10 ms ticks)."""
    t0 = time.time()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(2)"])
    try:
        time.sleep(0.3)
        started = process_start_time(child.pid)
    finally:
        child.kill()
        child.wait()
    assert t0 - 0.05 <= started <= t0 + 0.35
    assert process_start_time() <= time.time()


def test_a_part_adds_its_seconds_to_the_innermost_running_phase() -> None:
    timeline = StartupTimeline(origin=time.time())
    with timeline.part("outside"):  # no phase running: nothing to add to, nothing recorded
        pass
    with timeline.phase("env") as env:
        with timeline.part("model"):
            time.sleep(0.05)
        with timeline.phase("listing") as inner:
            with timeline.part("dry_step"):
                time.sleep(0.02)
        for _ in range(2):
            with timeline.part("upload"):
                time.sleep(0.02)
    assert [p.name for p in timeline.phases] == ["listing", "env"]
    assert set(inner.detail) == {"dry_step_s"} and 0.02 <= inner.detail["dry_step_s"] < env.seconds
    assert set(env.detail) == {"model_s", "upload_s"}, env.detail
    assert 0.05 <= env.detail["model_s"] and 0.04 <= env.detail["upload_s"]
    assert env.detail["model_s"] + env.detail["upload_s"] + inner.seconds <= env.seconds
    assert env.record(timeline.origin)["upload_s"] == round(env.detail["upload_s"], 3)


def test_a_phase_records_its_seconds_and_what_the_counters_gained() -> None:
    count = {"n": 0.0}
    timeline = StartupTimeline(origin=time.time())
    timeline.add_counter("things", lambda: {"torch_compile_s": count["n"], "unchanged": 5.0})
    timeline.add_counter("broken", lambda: 1 / 0)  # a counter never breaks start-up
    with timeline.phase("compile") as p:
        time.sleep(0.05)
        count["n"] = 2.5
    assert p.seconds >= 0.05 and p.detail == {"torch_compile_s": 2.5}
    assert timeline.last("compile") is p
    later = timeline.add_since_last("rest")
    assert abs(later.start - (p.start + p.seconds)) < 1e-9
    rec = timeline.record()
    assert rec["pid"] == os.getpid() and [x["name"] for x in rec["phases"]] == ["compile", "rest"]
    line = console_line("ready", [p], timeline.origin)
    assert line.startswith("duorl: start-up ") and " s  ready: compile " in line
    assert line.endswith(f"compile {p.seconds:.1f} s (torch.compile 2.5 s)")


def test_describe_names_warp_loads_and_a_background_preload() -> None:
    p = Phase("first tick", 0.0, 12.34, {"torch_compile_s": 8.0, "warp_modules": 35.0, "warp_compiled": 30.0})
    assert describe(p) == "12.3 s (torch.compile 8.0 s; warp 35 modules loaded, 30 compiled)"
    q = Phase("warp modules preloaded", 0.0, 9.0, {"modules": 35.0, "workers": 4.0, "first_step_waited_s": 3.0})
    assert describe(q) == "9.0 s (35 modules on 4 threads, the first step waited 3.0 s)"


def test_startup_json_puts_both_processes_on_the_learners_clock() -> None:
    learner = {"pid": 1, "process_start": 100.0, "phases": [{"name": "imports", "start_s": 0.0, "seconds": 2.0}]}
    collector = {"pid": 2, "process_start": 103.0, "phases": [{"name": "env", "start_s": 1.0, "seconds": 4.0}]}
    out = merged_record(learner, collector)
    assert out["collector"] == [{"name": "env", "start_s": 4.0, "seconds": 4.0, "end_s": 8.0}]
    assert out["learner"][0]["end_s"] == 2.0 and out["collector_process_start_s"] == 3.0
    assert "collector" not in merged_record(learner, None)
