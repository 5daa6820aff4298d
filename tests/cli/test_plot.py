"""`duorl plot RUN_DIR`: the learning curves of any run from its metrics.jsonl, a killed one too (no
plots/ folder, a torn last line); the one file it writes is RUN_DIR/plots/learning_curves.png."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from duorl.cli.main import main


def _killed_run(tmp_path: Path) -> Path:
    """A run directory as a SIGKILL leaves it: config, summary 'running', metrics with a torn last line,
    no plots/."""
    run = tmp_path / "killed"
    run.mkdir()
    cfg = {"algo": {"name": "sac", "batch_size": 32, "updates_per_step": 2, "learning_starts": 4},
           "task": {"name": "pendulum_swingup"}, "sim": {"name": "mujoco"}, "training": {"num_envs": 4, "seed": 1}}
    (run / "run_config.json").write_text(json.dumps(cfg))
    (run / "run_summary.json").write_text(json.dumps({"status": "running", "iterations": 30}))
    rows = [{"iteration": i, "env_steps": 4 * i, "wall_s": 0.1 * i, "Train/mean_episode_return": -100.0 + i,
             "Perf/env_steps_per_s": 200.0 + i % 5, "Perf/iteration_ms": 20.0 + i % 3,
             **({"Loss/critic": 3.0 / i} if i > 4 else {})} for i in range(1, 31)]
    body = "".join(json.dumps(r) + "\n" for r in rows) + '{"iteration": 31, "env_st'
    (run / "metrics.jsonl").write_text(body)
    return run


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def test_plot_draws_a_killed_runs_curves(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _killed_run(tmp_path)
    before = _files(run)
    assert main(["plot", str(run)]) == 0
    out, err = capsys.readouterr()
    png = run / "plots" / "learning_curves.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    assert _files(run) - before == {"plots", "plots/learning_curves.png"}  # nothing else written
    assert out == f"wrote {png}: 30 rows, iterations 1 to 30\n"
    assert "skipped the torn last line 31" in err
    # drawn again, it rewrites that one file (as --help says)
    png.write_bytes(b"stale")
    assert main(["plot", str(run)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and _files(run) - before == {"plots", "plots/learning_curves.png"}


def test_plot_help_says_what_it_writes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plot", "--help"]) == 0
    assert "(re)writes that one file" in capsys.readouterr().out.replace("\n", " ")
