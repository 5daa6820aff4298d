"""Learning-curve PNGs from metrics.jsonl (written at the end of a run)."""

from __future__ import annotations

from pathlib import Path

from duorl.telemetry.metrics_file import read_metrics

CURVES = (
    ("Train/mean_episode_return", "mean episode return"),
    ("Train/mean_episode_length", "mean episode length"),
    ("Perf/env_steps_per_s", "env steps/s"),
    ("Loss/critic", "critic loss"),
)


def panels(rows: list[dict]) -> list[tuple[str, list[tuple[str, str]]]]:
    """(title, [(metrics key, legend label), ...]) per panel: the fixed curves, then one panel per task
    diagnostic (Task/...). A deterministic-env curve (training.eval_envs: Eval/<name>), where one was
    logged, shares the panel of its exploring-env counterpart."""
    logged = {k for r in rows for k in r}
    task_keys = sorted(k for k in logged if k.startswith("Task/"))
    out = []
    for key, title in list(CURVES) + [(k, k.removeprefix("Task/").replace("_", " ")) for k in task_keys]:
        eval_key = "Eval/" + key.split("/", 1)[1]
        if eval_key in logged:
            out.append((title, [(key, "exploring envs"), (eval_key, "deterministic envs")]))
        else:
            out.append((title, [(key, "")]))
    return out


def plot_learning_curves(run_dir: Path) -> Path | None:
    """Write RUN_DIR/plots/learning_curves.png against env steps; None when nothing was logged."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt

    rows = read_metrics(Path(run_dir) / "metrics.jsonl")
    if not rows:
        return None
    layout = panels(rows)
    cols = 2 if len(layout) <= 4 else 3
    nrows = -(-len(layout) // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(5 * cols, 3.25 * nrows), squeeze=False)
    for ax in list(axes.flat)[len(layout):]:
        ax.set_visible(False)
    for ax, (title, curves) in zip(axes.flat, layout):
        for key, label in curves:
            pts = [(r["env_steps"], r[key]) for r in rows if isinstance(r.get(key), (int, float))]
            if pts:
                ax.plot(*zip(*pts), label=label or None)
        if len(curves) > 1:
            ax.legend(fontsize=8)
        ax.set_title(title)
        ax.set_xlabel("env steps")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    out = Path(run_dir) / "plots" / "learning_curves.png"
    out.parent.mkdir(exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
