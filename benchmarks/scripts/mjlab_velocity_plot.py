"""duorl's sac against mjlab's own PPO on an mjlab velocity task, by wall time (issue #40's learning half).

    python3 benchmarks/scripts/mjlab_velocity_plot.py collect OUT
    python3 benchmarks/scripts/mjlab_velocity_plot.py plot OUT [OUT ...] --png curves.png --md table.md

`collect OUT` turns one run of benchmarks/scripts/mjlab_velocity_h200.sh (OUT/run.env names the trainer,
the seed and the start's epoch seconds) into OUT/curve.csv: wall_s, iteration, mean_episode_return,
mean_episode_length. duorl: from OUT/run/metrics.jsonl (its wall_s, build and compile included;
Train/mean_episode_return, Train/mean_episode_length). ppo: from the tensorboard event file under OUT/ppo/
(rsl_rl's Train/mean_reward and Train/mean_episode_length per iteration; wall_s is the event's wall time
less the start's, so mjlab's start-up counts as duorl's does; rsl_rl flushes its writer every 10 s, so a
run stopped by SIGINT may lose its last 10 s of rows). Rows only from the first ended episode on: a run
too short for one episode gives a header alone.

`plot` reads every OUT's curve.csv and writes one PNG (mean episode return and episode length against wall
minutes, a colour per trainer, a line per seed) and a markdown table of both at 1, 2, 5 and 10 minutes (the
last row at or before each; "-" where a run had not reached it or no episode had ended), per seed and the
mean over the seeds that reached it.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from pathlib import Path

COLUMNS = ("wall_s", "iteration", "mean_episode_return", "mean_episode_length")
MINUTES = (1, 2, 5, 10)


def read_run_env(out: Path) -> dict[str, str]:
    """OUT/run.env's KEY=VALUE lines (the harness writes trainer, task, seed, minutes, start_epoch)."""
    env = {}
    for line in (out / "run.env").read_text(encoding="utf-8").splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            env[k.strip()] = v.strip()
    return env


def duorl_curve(metrics: Path) -> list[dict[str, float]]:
    """Rows of a duorl metrics.jsonl that carry an episode return (none before the first episode ends)."""
    rows = []
    for line in metrics.read_text(encoding="utf-8").splitlines():
        try:
            r = json.loads(line)
        except ValueError:  # a live run's torn last line
            continue
        ret = r.get("Train/mean_episode_return")
        if ret is None:
            continue
        rows.append({"wall_s": float(r["wall_s"]), "iteration": int(r.get("iteration", 0)),
                     "mean_episode_return": float(ret),
                     "mean_episode_length": float(r.get("Train/mean_episode_length", math.nan))})
    return rows


def ppo_curve(log_root: Path, start_epoch: float) -> list[dict[str, float]]:
    """rsl_rl's Train/mean_reward and Train/mean_episode_length per iteration from the event file(s) under
    `log_root`, wall_s from `start_epoch` (tensorboard's reader: mjlab's tensorboard logger needs it anyway)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    by_step: dict[int, dict[str, float]] = {}
    for events in sorted(log_root.rglob("events.out.tfevents.*")):
        acc = EventAccumulator(str(events.parent), size_guidance={"scalars": 0})
        acc.Reload()
        tags = acc.Tags().get("scalars", [])
        for tag, col in (("Train/mean_reward", "mean_episode_return"), ("Train/mean_episode_length", "mean_episode_length")):
            if tag not in tags:
                continue
            for ev in acc.Scalars(tag):
                row = by_step.setdefault(int(ev.step), {"iteration": int(ev.step), "wall_s": ev.wall_time - start_epoch})
                row[col] = float(ev.value)
                row["wall_s"] = max(row["wall_s"], ev.wall_time - start_epoch)
    rows = [r for _, r in sorted(by_step.items()) if "mean_episode_return" in r]
    for r in rows:
        r.setdefault("mean_episode_length", math.nan)
    return rows


def write_csv(rows: list[dict[str, float]], path: Path) -> None:
    with path.open("w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, COLUMNS)
        w.writeheader()
        for r in rows:
            w.writerow({k: r[k] for k in COLUMNS})


def read_csv(path: Path) -> list[dict[str, float]]:
    with path.open(encoding="utf-8") as f:
        return [{k: float(v) for k, v in r.items()} for r in csv.DictReader(f)]


def collect(out: Path) -> Path:
    """OUT/curve.csv from the run in OUT (see the module docstring)."""
    env = read_run_env(out)
    if env["trainer"] == "duorl":
        rows = duorl_curve(out / "run" / "metrics.jsonl")
    elif env["trainer"] == "ppo":
        rows = ppo_curve(out / "ppo", float(env["start_epoch"]))
    else:
        raise ValueError(f"{out}/run.env: trainer {env['trainer']!r} is neither duorl nor ppo")
    write_csv(rows, out / "curve.csv")
    return out / "curve.csv"


def at(rows: list[dict[str, float]], minutes: float, col: str) -> float:
    """`col` of the last row at or before `minutes` of wall time; NaN if the run had not reached it."""
    if not rows or rows[-1]["wall_s"] < minutes * 60:
        return math.nan
    before = [r for r in rows if r["wall_s"] <= minutes * 60]
    return before[-1][col] if before else math.nan


def table(runs: list[tuple[str, str, list[dict[str, float]]]], minutes: tuple[float, ...] = MINUTES) -> str:
    """Markdown: per trainer and seed, then per trainer's mean, the return and the length at each time."""
    head = "| trainer | seed | " + " | ".join(f"return @{m} min | length @{m} min" for m in minutes) + " |"
    lines = [head, "|" + "---|" * (2 + 2 * len(minutes))]
    fmt = lambda v: "-" if math.isnan(v) else f"{v:.2f}"  # noqa: E731
    for trainer in sorted({t for t, _, _ in runs}):
        mine = [(s, rows) for t, s, rows in runs if t == trainer]
        for seed, rows in sorted(mine):
            cells = [fmt(at(rows, m, c)) for m in minutes for c in ("mean_episode_return", "mean_episode_length")]
            lines.append(f"| {trainer} | {seed} | " + " | ".join(cells) + " |")
        cells = []
        for m in minutes:
            for c in ("mean_episode_return", "mean_episode_length"):
                vals = [v for _, rows in mine if not math.isnan(v := at(rows, m, c))]
                cells.append(fmt(sum(vals) / len(vals)) if vals else "-")
        lines.append(f"| {trainer} | mean | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot(runs: list[tuple[str, str, list[dict[str, float]]]], png: Path, title: str = "") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = {"duorl": "tab:blue", "ppo": "tab:orange"}
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for trainer, seed, rows in runs:
        x = [r["wall_s"] / 60 for r in rows]
        for ax, col in zip(axes, ("mean_episode_return", "mean_episode_length")):
            ax.plot(x, [r[col] for r in rows], color=colours.get(trainer, "gray"), alpha=0.8,
                    label=f"{trainer} seed {seed}")
    for ax, name in zip(axes, ("mean episode return", "mean episode length")):
        ax.set_xlabel("wall time (minutes, start-up included)")
        ax.set_ylabel(name)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


def load_runs(outs: list[Path]) -> list[tuple[str, str, list[dict[str, float]]]]:
    runs = []
    for out in outs:
        env = read_run_env(out)
        runs.append((env["trainer"], env.get("seed", "?"), read_csv(out / "curve.csv")))
    return runs


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect")
    c.add_argument("out", type=Path)
    q = sub.add_parser("plot")
    q.add_argument("outs", type=Path, nargs="+")
    q.add_argument("--png", type=Path, required=True)
    q.add_argument("--md", type=Path, required=True)
    q.add_argument("--title", default="")
    args = p.parse_args(argv)
    if args.cmd == "collect":
        path = collect(args.out)
        print(f"{path}: {len(read_csv(path))} rows")
        return 0
    runs = load_runs(args.outs)
    plot(runs, args.png, args.title)
    text = table(runs)
    args.md.write_text(text, encoding="utf-8")
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
