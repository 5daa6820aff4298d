"""mjlab's rough-terrain velocity task on the CPU: its height-field terrain and terrain-level curriculum run
through duorl's duo, and the curriculum's level is a Task/ row."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.conftest import run_duorl

TASK = "mjlab:Mjlab-Velocity-Rough-Unitree-Go1"
ROW = "Task/Curriculum/terrain_levels/mean"


@pytest.mark.slow
def test_rough_go1_trains_with_its_terrain_curriculum_logged(tmp_path):
    run = tmp_path / "run"
    # 2-step episodes: every env ends one every other iteration, and each reset runs mjlab's terrain_levels curriculum
    r = run_duorl(run, "training.devices=[cpu]", "training.log_interval=1", "algo.learning_starts=1",
                  "training.num_envs=2", "algo.max_iterations=4", "task.max_episode_steps=2",
                  task=TASK, sim="mjwarp", timeout=400)
    assert r.returncode == 0, r.stderr[-4000:]
    summary = json.loads((run / "run_summary.json").read_text())
    assert summary["status"] == "completed" and summary["iterations"] == 4
    assert ROW.removeprefix("Task/") in summary["runtime_manifest"]["env_spec"]["metric_names"]
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    levels = [row[ROW] for row in rows[1:]]
    # a level of the generator's rows (mjlab's Go1 rough terrain: 10), the robot's episodes ended
    assert levels and all(np.isfinite(v) and 0 <= v < 10 for v in levels), levels
    assert rows[-1]["Task/Episode_Reward/track_linear_velocity"] > 0
