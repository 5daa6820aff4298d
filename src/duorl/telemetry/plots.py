"""Learning-curve PNGs from metrics.jsonl (written at the end of a run): RUN_DIR/plots/learning_curves.png.

What makes a panel worth its place: it changes during the run. The page shows, against env steps, the
episode return, the episode length, the task's own metrics (Task/*: tracking errors first), throughput
and time per iteration, the critic loss and the temperature; deterministic-env curves (Eval/*, from
training.eval_envs) share their exploring counterpart's panel. A metric that stays constant gets no panel,
only a mention under the plots (pendulum's fixed 200-step episodes, a G1 alive bonus). Throughput and
timing are scaled to the iterations after learning starts: the first iterations (compile, capture, an
empty replay ring) would squash the steady state into a line.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Sequence

from duorl.telemetry.metrics_file import NO_EPISODE_YET, RETURN_KEY, read_metrics


@dataclasses.dataclass(frozen=True)
class Panel:
    title: str
    curves: tuple[tuple[str, str], ...]  # (metrics key, legend label; "" = no legend)
    robust: bool = False  # y range from the rows after learning starts, outliers clipped
    log: bool = False  # log y axis when the values are positive and span a decade or more
    perf: bool = False  # throughput/timing: a running median over the raw points, pre-learning shaded


# (key, title) of the training curves that lead the page
_HEAD = ((RETURN_KEY, "mean episode return"), ("Train/mean_episode_length", "mean episode length"))
# where an iteration's time goes: one panel
_TIMING = (("Perf/iteration_ms", "iteration"), ("Perf/learner_train_ms", "learner train"),
           ("Perf/collector_iteration_ms", "collector"))


def _values(rows: Sequence[dict[str, Any]], key: str) -> list[float]:
    return [float(r[key]) for r in rows if isinstance(r.get(key), (int, float)) and not isinstance(r.get(key), bool)]


def _constant(rows: Sequence[dict[str, Any]], keys: Sequence[str]) -> float | None:
    """The value every listed curve holds through the run, or None if any of them moves."""
    vals = [v for k in keys for v in _values(rows, k)]
    if not vals:
        return None
    lo, hi = min(vals), max(vals)
    return lo if hi - lo <= 1e-6 * max(1.0, abs(hi), abs(lo)) else None


def _task_rank(key: str) -> int:
    """Tracking errors first (what a G1 run is judged by), then other diagnostics, then reward terms."""
    name = key.removeprefix("Task/")
    return 0 if "error" in name else 2 if name.startswith("rew_") else 1


def layout(rows: Sequence[dict[str, Any]]) -> tuple[list[Panel], list[str]]:
    """The panels worth drawing for these rows, in page order, and a note per metric left out because it
    is constant: return, length, task errors and diagnostics, steps/s, ms per iteration, critic loss,
    temperature, then the reward terms."""
    logged = {k for r in rows for k in r}

    def paired(key: str, title: str, **kw: bool) -> Panel:
        eval_key = "Eval/" + key.split("/", 1)[1]
        if eval_key in logged:
            return Panel(title, ((key, "exploring envs"), (eval_key, "deterministic envs")), **kw)
        return Panel(title, ((key, ""),), **kw)

    task = sorted((k for k in logged if k.startswith("Task/")), key=lambda k: (_task_rank(k), k))
    named = [(k, k.removeprefix("Task/").replace("_", " ")) for k in task]
    candidates = [paired(k, title) for k, title in _HEAD if k in logged]
    # tracking errors fall over decades in the first minutes: a log axis keeps the end readable
    candidates += [paired(k, title, log=_task_rank(k) == 0) for k, title in named if _task_rank(k) < 2]
    if "Perf/env_steps_per_s" in logged:
        candidates.append(Panel("env steps/s", (("Perf/env_steps_per_s", ""),), robust=True, perf=True))
    timing = tuple((k, label) for k, label in _TIMING if k in logged)
    if timing:
        candidates.append(Panel("ms per iteration", timing, robust=True, perf=True))
    if "Loss/critic" in logged:
        candidates.append(Panel("critic loss", (("Loss/critic", ""),)))
    if "Policy/alpha" in logged:
        candidates.append(Panel("temperature (alpha)", (("Policy/alpha", ""),), log=True))
    # reward terms: the first iterations' falls would set the scale of the whole run
    candidates += [paired(k, title, robust=True) for k, title in named if _task_rank(k) == 2]
    panels: list[Panel] = []
    constant: list[str] = []
    for p in candidates:
        value = _constant(rows, [k for k, _ in p.curves])
        if value is None:
            panels.append(p)
        else:
            constant.append(f"{p.title} = {value:.4g}")
    return panels, constant


def _run_config(run_dir: Path) -> dict[str, Any]:
    path = run_dir / "run_config.json"
    try:
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except (OSError, ValueError):
        return {}  # a plot is never worth failing a run over


def _steps(n: float) -> str:
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= div:
            return f"{n / div:.3g}{unit}"
    return f"{n:.0f}"


def title_lines(run_dir: Path, rows: Sequence[dict[str, Any]], cfg: dict[str, Any]) -> list[str]:
    """The run's name, then what ran (algo, task, sim, envs, batch, seed) and how far it got."""
    lines = [Path(run_dir).resolve().name]
    t, a = cfg.get("training", {}), cfg.get("algo", {})
    what = []
    if a.get("name") and cfg.get("task", {}).get("name"):
        what.append(f"{a['name']} on {cfg['task']['name']} ({cfg.get('sim', {}).get('name', '?')})")
    if "num_envs" in t:
        devices = t.get("devices") or []
        ranks = f" x {len(devices)} GPUs" if len(devices) > 1 else ""
        what.append(f"{t['num_envs']} envs{ranks}" + (f" ({t['eval_envs']} deterministic)" if t.get("eval_envs") else ""))
    if "batch_size" in a:
        what.append(f"batch {a['batch_size']} x {a.get('updates_per_step', '?')} updates/it")
    if "seed" in t:
        what.append(f"seed {t['seed']}")
    last = rows[-1]
    progress = f"{last.get('iteration', '?')} it, {_steps(float(last.get('env_steps', 0)))} env steps"
    if isinstance(last.get("wall_s"), (int, float)):
        progress += f", {last['wall_s'] / 60:.1f} min"
    lines.append("  ·  ".join([*what, progress]))
    return lines


def learning_start(rows: Sequence[dict[str, Any]], cfg: dict[str, Any]) -> float:
    """Env steps at which learning starts: the first row with a critic loss; failing that, what the
    config says (algo.learning_starts ticks of training.num_envs envs); failing that, 0."""
    for r in rows:
        if isinstance(r.get("Loss/critic"), (int, float)):
            return float(r.get("env_steps", 0))
    t, a = cfg.get("training", {}), cfg.get("algo", {})
    return float(a.get("learning_starts", 0) * t.get("num_envs", 0))


def _robust_limits(values: list[float]) -> tuple[float, float] | None:
    """The 1st..99th percentile with a margin: a few stalls (checkpoints, evaluation) stay visible as
    clipped spikes without setting the scale."""
    if len(values) < 5:
        return None
    s = sorted(values)
    lo, hi = s[int(0.01 * (len(s) - 1))], s[int(round(0.99 * (len(s) - 1)))]
    pad = 0.1 * (hi - lo) or 0.05 * abs(hi) or 1.0
    return lo - pad, hi + pad


def _running_median(ys: list[float], window: int) -> list[float]:
    import numpy as np

    half = window // 2
    padded = np.pad(np.asarray(ys, dtype=float), half, mode="edge")
    return list(np.median(np.lib.stride_tricks.sliding_window_view(padded, 2 * half + 1), axis=1))


def _draw(ax: Any, panel: Panel, rows: Sequence[dict[str, Any]], start: float, last_step: float) -> None:
    from matplotlib.ticker import EngFormatter

    steady: list[float] = []
    everything: list[float] = []
    for key, label in panel.curves:
        pts = [(float(r["env_steps"]), float(r[key])) for r in rows
               if isinstance(r.get(key), (int, float)) and "env_steps" in r]
        if not pts:
            continue
        xs, ys = zip(*pts)
        if panel.perf and len(pts) > 50:
            # raw points faint, the running median over about 2% of the run on top
            (line,) = ax.plot(xs, ys, linewidth=0.6, alpha=0.3)
            ax.plot(xs, _running_median(list(ys), max(3, len(ys) // 50)), color=line.get_color(),
                    linewidth=1.4, label=label or None)
        else:
            ax.plot(xs, ys, label=label or None, linewidth=1.0)
        steady += [y for x, y in pts if x > start]
        everything += ys
    if panel.robust:
        limits = _robust_limits(steady)
        if limits is not None:
            ax.set_ylim(*limits)
    shaded = panel.perf and start > 0.005 * last_step  # visible at all
    if shaded:
        ax.axvspan(0, min(start, last_step), color="0.85", alpha=0.6, label="before learning")
    if panel.log and everything and min(everything) > 0 and max(everything) >= 10 * min(everything):
        from matplotlib.ticker import FuncFormatter, LogLocator

        ax.set_yscale("log")
        plain = FuncFormatter(lambda v, _: f"{v:g}")  # 0.2, not 2x10^-1
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_locator(LogLocator(subs=(2.0, 5.0)))
        ax.yaxis.set_minor_formatter(plain)
    if len(panel.curves) > 1 or shaded:
        ax.legend(fontsize=7)
    ax.set_title(panel.title, fontsize=10)
    ax.set_xlabel("env steps", fontsize=8)
    ax.xaxis.set_major_formatter(EngFormatter(sep=""))
    ax.tick_params(labelsize=8)
    ax.grid(alpha=0.3)


def plot_learning_curves(run_dir: Path) -> Path | None:
    """Write RUN_DIR/plots/learning_curves.png against env steps; None when nothing was logged."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt

    run_dir = Path(run_dir)
    rows = read_metrics(run_dir / "metrics.jsonl")
    if not rows:
        return None
    cfg = _run_config(run_dir)
    panels, constant = layout(rows)
    start = learning_start(rows, cfg)
    cols = 2 if len(panels) <= 4 else 3
    nrows = max(1, -(-len(panels) // cols))
    top_in, bottom_in = 0.6, 0.3  # inches for the two title lines and the note on constant metrics
    fig, axes = plt.subplots(nrows, cols, figsize=(5 * cols, 3.1 * nrows + top_in + bottom_in), squeeze=False)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    last_step = max(float(r.get("env_steps", 0)) for r in rows)
    for ax, panel in zip(axes.flat, panels):
        _draw(ax, panel, rows, start, last_step)
    lines = title_lines(run_dir, rows, cfg)
    height = fig.get_figheight()
    fig.text(0.5, 1 - 0.08 / height, lines[0], ha="center", va="top", fontsize=13, fontweight="bold")
    fig.text(0.5, 1 - 0.36 / height, lines[1], ha="center", va="top", fontsize=9)
    notes = [] if any(RETURN_KEY in r for r in rows) else [f"mean episode return: {NO_EPISODE_YET}"]
    if constant:
        notes.append("constant through the run (no panel): " + ", ".join(constant))
    if notes:
        fig.text(0.5, 0.08 / height, "; ".join(notes), ha="center", va="bottom", fontsize=8, color="0.35")
    fig.tight_layout(rect=(0, bottom_in / height, 1, 1 - top_in / height))
    out = run_dir / "plots" / "learning_curves.png"
    out.parent.mkdir(exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
