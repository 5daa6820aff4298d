import json

from duorl.telemetry.plots import plot_learning_curves


def test_learning_curve_png(tmp_path):
    rows = [{"iteration": i, "env_steps": 16 * i, "Train/mean_episode_return": float(i), "Perf/env_steps_per_s": 100.0} for i in range(1, 30)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = plot_learning_curves(tmp_path)
    assert out is not None and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_no_metrics_no_plot(tmp_path):
    (tmp_path / "metrics.jsonl").write_text("")
    assert plot_learning_curves(tmp_path) is None
