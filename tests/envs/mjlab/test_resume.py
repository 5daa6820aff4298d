"""A resumed mjlab run starts new episodes (mjlab's env state is not checkpointed), and what of the env that
training depends on starts over with them is said, not silent: a warning at the resume and the manifest's
`resumed_from.restarts` (envs/mjlab/resume.py)."""

from __future__ import annotations

import json

import pytest

from duorl.envs.task_sources import source_of, task_config
from tests.conftest import run_duorl

GO1 = "mjlab:Mjlab-Velocity-Flat-Unitree-Go1"


def _restarts(name: str) -> list[str]:
    return source_of(name).resume_restarts(task_config(name))


@pytest.mark.slow  # imports mjlab: 10 s
def test_what_restarts_is_read_from_the_tasks_configuration():
    rough = _restarts("mjlab:Mjlab-Velocity-Rough-Unitree-Go1")
    assert len(rough) == 1 and "(terrain_levels, command_vel) starts over" in rough[0]
    assert "initial terrain levels" in rough[0] and "step counter" in rough[0]
    flat = _restarts(GO1)
    assert len(flat) == 1 and "(command_vel)" in flat[0] and "terrain" not in flat[0]
    tracking = _restarts("mjlab:Mjlab-Tracking-Flat-Unitree-G1")
    assert len(tracking) == 1 and "command motion samples start frames" in tracking[0]
    assert _restarts("mjlab:Mjlab-Cartpole-Swingup") == []  # nothing kept beyond the episodes
    assert source_of("pendulum_swingup").resume_restarts(task_config("pendulum_swingup")) == []


@pytest.mark.slow
def test_a_resumed_run_says_its_curriculum_starts_over(tmp_path):
    first, resumed = tmp_path / "first", tmp_path / "resumed"
    common = ["training.devices=[cpu]", "training.log_interval=1", "algo.learning_starts=1", "training.num_envs=2",
              "algo.save_interval=2"]
    r = run_duorl(first, *common, "algo.max_iterations=2", task=GO1, sim="mjwarp", timeout=400)
    assert r.returncode == 0, r.stderr[-4000:]
    r = run_duorl(resumed, *common, "algo.max_iterations=3", f"training.resume={first}", task=GO1, sim="mjwarp",
                  timeout=400)
    assert r.returncode == 0, r.stderr[-4000:]
    warnings = [line for line in r.stderr.splitlines() if line.startswith("duorl: warning: training.resume:")]
    assert len(warnings) == 1 and "(command_vel) starts over" in warnings[0], r.stderr[-3000:]
    origin = json.loads((resumed / "run_summary.json").read_text())["runtime_manifest"]["resumed_from"]
    assert origin["iteration"] == 2 and origin["collector_state"] is False
    assert origin["restarts"] == [warnings[0].removeprefix("duorl: warning: training.resume: ")]
