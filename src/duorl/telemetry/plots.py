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


def plot_learning_curves(run_dir: Path) -> Path | None:
    """Write RUN_DIR/plots/learning_curves.png against env steps; None when nothing was logged."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt

    rows = read_metrics(Path(run_dir) / "metrics.jsonl")
    if not rows:
        return None
    # the task's own diagnostics (Task/..., e.g. velocity tracking error) get panels of their own
    task_keys = sorted({k for r in rows for k in r if k.startswith("Task/")})
    curves = list(CURVES) + [(k, k.removeprefix("Task/").replace("_", " ")) for k in task_keys]
    cols = 2 if len(curves) <= 4 else 3
    nrows = -(-len(curves) // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(5 * cols, 3.25 * nrows), squeeze=False)
    for ax in list(axes.flat)[len(curves):]:
        ax.set_visible(False)
    for ax, (key, label) in zip(axes.flat, curves):
        pts = [(r["env_steps"], r[key]) for r in rows if isinstance(r.get(key), (int, float))]
        if pts:
            ax.plot(*zip(*pts))
        ax.set_title(label)
        ax.set_xlabel("env steps")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    out = Path(run_dir) / "plots" / "learning_curves.png"
    out.parent.mkdir(exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
