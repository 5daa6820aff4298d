"""benchmarks/scripts/mjlab_velocity_plot.py on synthetic runs: duorl's metrics.jsonl and rsl_rl's
tensorboard events become one curve format, and the table reads each curve at 1, 2, 5 and 10 minutes."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.benchmark_scripts import load_script


def _script():
    return load_script("mjlab_velocity_plot")


def _run_env(out: Path, trainer: str, seed: int, start: float = 1000.0) -> None:
    out.mkdir(parents=True)
    (out / "run.env").write_text(f"trainer={trainer}\ntask=T\nseed={seed}\nminutes=3\nstart_epoch={start}\n")


def _duorl_run(out: Path, seed: int, scale: float) -> None:
    _run_env(out, "duorl", seed)
    (out / "run").mkdir()
    rows = [{"iteration": 0, "env_steps": 0, "wall_s": 20.0}]  # no episode ended yet: no return key
    rows += [{"iteration": i, "env_steps": i * 10, "wall_s": 30.0 * i, "Train/mean_episode_return": scale * i,
              "Train/mean_episode_length": 10.0 * i} for i in range(1, 8)]  # to 210 s
    text = "\n".join(json.dumps(r) for r in rows) + '\n{"iteration": 8, "wal'  # a live run's torn last line
    (out / "run" / "metrics.jsonl").write_text(text)


def test_duorl_curve_and_the_table_at_fixed_minutes(tmp_path):
    m = _script()
    _duorl_run(tmp_path / "a", 1, 1.0)
    _duorl_run(tmp_path / "b", 2, 3.0)
    for out in ("a", "b"):
        m.collect(tmp_path / out)
    rows = m.read_csv(tmp_path / "a" / "curve.csv")
    assert [r["wall_s"] for r in rows] == [30.0 * i for i in range(1, 8)]
    runs = m.load_runs([tmp_path / "a", tmp_path / "b"])
    assert m.at(rows, 1, "mean_episode_return") == 2.0  # the row at 60 s
    assert m.at(rows, 2, "mean_episode_length") == 40.0
    assert math.isnan(m.at(rows, 5, "mean_episode_return"))  # the run ended at 210 s
    text = m.table(runs)
    lines = text.splitlines()
    assert lines[0].startswith("| trainer | seed | return @1 min | length @1 min | return @2 min")
    assert lines[2] == "| duorl | 1 | 2.00 | 20.00 | 4.00 | 40.00 | - | - | - | - |"
    assert lines[3] == "| duorl | 2 | 6.00 | 20.00 | 12.00 | 40.00 | - | - | - | - |"
    assert lines[4] == "| duorl | mean | 4.00 | 20.00 | 8.00 | 40.00 | - | - | - | - |"
    png = tmp_path / "c.png"
    assert m.main(["plot", str(tmp_path / "a"), str(tmp_path / "b"), "--png", str(png), "--md",
                   str(tmp_path / "t.md")]) == 0
    assert png.stat().st_size > 1000 and (tmp_path / "t.md").read_text() == text


def test_ppo_events_become_the_same_curve_with_wall_time_from_the_start(tmp_path):
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    m = _script()
    out = tmp_path / "p"
    _run_env(out, "ppo", 7, start=1000.0)
    w = SummaryWriter(str(out / "ppo" / "exp" / "run1"))
    for it in range(5):
        w.add_scalar("Train/mean_reward", 2.0 * it, it, walltime=1000.0 + 40.0 + 30.0 * it)
        w.add_scalar("Train/mean_episode_length", 100.0 + it, it, walltime=1000.0 + 40.0 + 30.0 * it)
        w.add_scalar("Loss/value", 1.0, it, walltime=1000.0 + 40.0 + 30.0 * it)
    w.close()
    rows = m.read_csv(m.collect(out))
    assert [r["iteration"] for r in rows] == [0, 1, 2, 3, 4]
    assert [r["wall_s"] for r in rows] == pytest.approx([40.0, 70.0, 100.0, 130.0, 160.0])
    assert rows[2]["mean_episode_return"] == 4.0 and rows[2]["mean_episode_length"] == 102.0
    table = m.table(m.load_runs([out]))
    assert "| ppo | 7 | 0.00 | 100.00 | 4.00 | 102.00 | - |" in table  # 60 s: iteration 0 (40 s); 120 s: 2 (100 s)
