"""A task of one's own, registered through mjlab's own mechanism (the example package's `mjlab.tasks` entry
point), trains through duorl as `--task mjlab:<its id>`, in the learner and the spawned collector alike."""

from __future__ import annotations

import json
import os
import subprocess

import numpy as np
import pytest

from tests.conftest import duorl_cmd
from tests.envs.mjlab.packages import EXAMPLE_TASK, example_pythonpath


@pytest.mark.slow
def test_the_example_mjlab_task_trains_three_iterations(tmp_path):
    run = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": example_pythonpath(tmp_path / "site"), "PYTHONUNBUFFERED": "1"}
    cmd = duorl_cmd(run, "training.devices=[cpu]", "training.log_interval=1", "algo.learning_starts=1",
                    "algo.max_iterations=3", task=EXAMPLE_TASK, sim="mjwarp")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=400, env=env)
    assert r.returncode == 0, r.stderr[-4000:]
    summary = json.loads((run / "run_summary.json").read_text())
    assert summary["status"] == "completed" and summary["iterations"] == 3
    spec = summary["runtime_manifest"]["env_spec"]
    assert (spec["task"], spec["actor_obs_dim"], spec["action_dim"]) == (EXAMPLE_TASK, 3, 1)
    # its own reward and termination terms, as Task/ rows; 4 s episodes of 0.02 s steps
    assert spec["metric_names"] == ["Episode_Reward/upright", "Episode_Termination/spinning"]
    assert spec["max_episode_steps"] == 200
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    # hanging down (angle pi +- 0.3): the upright reward (1 + cos) / 2 is small but not zero
    assert all(0 <= row["Task/Episode_Reward/upright"] < 0.1 for row in rows[1:]), rows
    assert np.isfinite(rows[-1]["Task/Episode_Termination/spinning"])
