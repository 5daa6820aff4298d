import json

import pytest

from duorl.cli.bench.mps_matrix import MatrixSpec, run_matrix


def _fake_runner(steps_per_s, log_interval=1):
    calls = []

    def run(cmd):
        calls.append(cmd)
        log_dir = next(a.split("=", 1)[1] for a in cmd if a.startswith("training.log_dir="))
        mps = "training.cuda_process_sharing=mps" in cmd
        from pathlib import Path

        d = Path(log_dir)
        d.mkdir(parents=True)
        rows = [{"iteration": i, "env_steps": i * 10, "Perf/env_steps_per_s": steps_per_s["mps" if mps else "off"] + (1000.0 if i <= 50 else 0.0),
                 "Perf/iteration_ms": 10.0, "Train/nan_resets": 0.0} for i in range(log_interval, 301, log_interval)]
        (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        sharing = {"configured": "mps", "validated": True} if mps else {"configured": None, "validated": False}
        (d / "run_summary.json").write_text(json.dumps({"status": "completed", "runtime_manifest": {"cuda_process_sharing": sharing}}))
        return 0

    return run, calls


def test_matrix_interleaves_arms_ignores_warmup_and_reports_gain(tmp_path):
    run, calls = _fake_runner({"off": 100.0, "mps": 125.0})
    res = run_matrix(MatrixSpec("sac", "pendulum_swingup", "mjwarp", 300, 2), tmp_path, run)
    arms = ["mps" if "training.cuda_process_sharing=mps" in c else "off" for c in calls]
    assert arms == ["off", "mps", "off", "mps"]
    assert all("algo.max_iterations=300" in c for c in calls)
    # otherwise identical commands
    strip = lambda c: [a for a in c if not a.startswith("training.log_dir=") and a != "training.cuda_process_sharing=mps"]  # noqa: E731
    assert strip(calls[0]) == strip(calls[1])
    assert res["arms"]["off"]["env_steps_per_s"] == 100.0  # the first 50 iterations (+1000) are ignored
    assert res["throughput_gain"] == pytest.approx(0.25)
    assert res["arms"]["mps"]["mps_validated_every_run"] and not res["arms"]["off"]["mps_validated_every_run"]
    assert res["runs"]["off"][0]["iterations_reported"] == 100


def test_a_log_interval_override_keeps_the_window_in_iterations(tmp_path):
    """training.log_interval=5 passed through: rows every 5 iterations, so the last 100 iterations are 20
    rows (counting 100 rows would reach back into iterations 51-200)."""
    run, calls = _fake_runner({"off": 100.0, "mps": 110.0}, log_interval=5)
    res = run_matrix(MatrixSpec("sac", "t", None, 300, 1, ("training.log_interval=5",)), tmp_path, run)
    assert all(c[-1 if "training.cuda_process_sharing=mps" not in c else -2] == "training.log_interval=5" for c in calls)
    off = res["runs"]["off"][0]
    assert off["iterations_reported"] == 100 and off["log_rows_reported"] == 20
    assert res["throughput_gain"] == pytest.approx(0.10)


def test_matrix_needs_enough_iterations():
    with pytest.raises(ValueError, match=">= 150"):
        MatrixSpec("sac", "t", None, 100, 2).check()
