import json

from duorl.telemetry.plots import panels, plot_learning_curves


def test_learning_curve_png(tmp_path):
    rows = [{"iteration": i, "env_steps": 16 * i, "Train/mean_episode_return": float(i), "Perf/env_steps_per_s": 100.0} for i in range(1, 30)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = plot_learning_curves(tmp_path)
    assert out is not None and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_no_metrics_no_plot(tmp_path):
    (tmp_path / "metrics.jsonl").write_text("")
    assert plot_learning_curves(tmp_path) is None


def test_deterministic_env_curves_share_their_counterparts_panels(tmp_path):
    """training.eval_envs logs Eval/<name> beside Train/<name> and Task/<name>: each pair is one panel."""
    rows = [{"iteration": i, "env_steps": 16 * i, "Train/mean_episode_length": 5.0, "Eval/mean_episode_length": 6.0,
             "Task/lin_vel_error": 0.5, "Eval/lin_vel_error": 0.2, "Task/penalty_scale": 1.0} for i in range(1, 4)]
    by_title = dict(panels(rows))
    assert by_title["mean episode length"] == [("Train/mean_episode_length", "exploring envs"),
                                               ("Eval/mean_episode_length", "deterministic envs")]
    assert by_title["lin vel error"] == [("Task/lin_vel_error", "exploring envs"),
                                         ("Eval/lin_vel_error", "deterministic envs")]
    assert by_title["penalty scale"] == [("Task/penalty_scale", "")]
    assert "Eval/lin_vel_error" not in by_title  # no panel of its own
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert plot_learning_curves(tmp_path) is not None
