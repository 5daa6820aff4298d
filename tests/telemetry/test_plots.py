import json

from duorl.telemetry.plots import layout, learning_start, plot_learning_curves, title_lines


def _write(run_dir, rows, config=None):
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if config is not None:
        (run_dir / "run_config.json").write_text(json.dumps(config))


def test_learning_curve_png_without_a_run_config(tmp_path):
    rows = [{"iteration": i, "env_steps": 16 * i, "Train/mean_episode_return": float(i), "Perf/env_steps_per_s": 100.0 + i % 3}
            for i in range(1, 30)]
    _write(tmp_path, rows)
    out = plot_learning_curves(tmp_path)
    assert out is not None and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_no_metrics_no_plot(tmp_path):
    (tmp_path / "metrics.jsonl").write_text("")
    assert plot_learning_curves(tmp_path) is None


def _g1_rows(n=60):
    """A g1_walk_flat-like metrics file: moving errors, a constant alive bonus, deterministic envs."""
    return [{"iteration": i, "env_steps": 4096 * i, "wall_s": 0.03 * i,
             "Train/mean_episode_length": min(1000.0, 20.0 * i), "Eval/mean_episode_length": min(1000.0, 25.0 * i),
             "Task/lin_vel_error": 1.0 / i, "Eval/lin_vel_error": 0.8 / i, "Task/penalty_scale": min(1.0, 0.1 + 0.02 * i),
             "Task/rew_alive": 0.2, "Eval/rew_alive": 0.2, "Task/rew_pose": -0.01 * (i % 7),
             "Perf/env_steps_per_s": 1e4 if i < 10 else 1.4e5 + 100 * (i % 5), "Perf/iteration_ms": 28.0 + i % 3,
             **({"Loss/critic": 3.0 - 0.01 * i} if i >= 10 else {})} for i in range(1, n + 1)]


def test_deterministic_env_curves_share_their_counterparts_panels():
    """training.eval_envs logs Eval/<name> beside Train/<name> and Task/<name>: each pair is one panel."""
    by_title = {p.title: p.curves for p in layout(_g1_rows())[0]}
    assert by_title["mean episode length"] == (("Train/mean_episode_length", "exploring envs"),
                                               ("Eval/mean_episode_length", "deterministic envs"))
    assert by_title["lin vel error"] == (("Task/lin_vel_error", "exploring envs"), ("Eval/lin_vel_error", "deterministic envs"))
    assert by_title["penalty scale"] == (("Task/penalty_scale", ""),)
    assert not any(title.startswith("Eval") for title in by_title)  # no panel of its own


def test_panels_carry_information_for_the_task():
    panels, constant = layout(_g1_rows())
    titles = [p.title for p in panels]
    # training curves, then the tracking error ahead of perf and losses, reward terms last
    assert titles[:3] == ["mean episode length", "lin vel error", "penalty scale"]
    assert titles.index("lin vel error") < titles.index("env steps/s") < titles.index("critic loss") < titles.index("rew pose")
    assert "rew alive" not in titles and constant == ["rew alive = 0.2"]  # flat: a note, not a panel
    by_title = {p.title: p for p in panels}
    assert by_title["env steps/s"].robust and by_title["lin vel error"].log
    # pendulum: fixed 200-step episodes make a flat length curve
    flat = [{"iteration": i, "env_steps": 16 * i, "Train/mean_episode_length": 200.0,
             "Train/mean_episode_return": float(i)} for i in range(1, 5)]
    panels, constant = layout(flat)
    assert [p.title for p in panels] == ["mean episode return"] and constant == ["mean episode length = 200"]


def test_steps_per_s_scale_ignores_the_pre_learning_phase(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from duorl.telemetry.plots import _draw

    rows = _g1_rows()
    start = learning_start(rows, {})
    assert start == 4096 * 10  # the first row with a critic loss
    panel = next(p for p in layout(rows)[0] if p.title == "env steps/s")
    fig, ax = plt.subplots()
    _draw(ax, panel, rows, start, rows[-1]["env_steps"])
    lo, hi = ax.get_ylim()
    plt.close(fig)
    assert 1.3e5 < lo < 1.4e5 and 1.404e5 < hi < 1.5e5  # the steady state fills the panel; the 1e4 start is clipped


def test_title_names_the_run_and_its_config(tmp_path):
    run = tmp_path / "g1_walk_flat-sac-20261201-120000"
    run.mkdir()
    cfg = {"training": {"num_envs": 4096, "eval_envs": 256, "seed": 3, "devices": None},
           "algo": {"name": "sac", "batch_size": 8192, "updates_per_step": 8},
           "task": {"name": "g1_walk_flat"}, "sim": {"name": "mjwarp"}}
    rows = _g1_rows()
    name, summary = title_lines(run, rows, cfg)
    assert name == run.name
    for part in ("sac on g1_walk_flat (mjwarp)", "4096 envs (256 deterministic)", "batch 8192 x 8", "seed 3",
                 "60 it", "246k env steps"):
        assert part in summary, part
    _write(run, rows, cfg)  # every kind of panel: paired, log, robust with a running median, a constant note
    out = plot_learning_curves(run)
    assert out == run / "plots" / "learning_curves.png" and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
