"""The example mjlab task package (examples/duorl-example-mjlab-task) made importable by path: its folder and
a dist-info naming its `mjlab.tasks` entry point on PYTHONPATH, as an install would leave them (no pip)."""

from __future__ import annotations

import os
from pathlib import Path

from tests.envs.fake_tasks import fake_distribution

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "duorl-example-mjlab-task"
EXAMPLE_DIST = "duorl-example-mjlab-task"
EXAMPLE_TASK = "mjlab:Duorl-Example-Pendulum"


def example_pythonpath(site: Path) -> str:
    """PYTHONPATH with duorl's source, the tests, the example package and its dist-info (written in `site`)."""
    fake_distribution(site, EXAMPLE_DIST, {"duorl_example_mjlab_task": "duorl_example_mjlab_task"}, group="mjlab.tasks")
    return os.pathsep.join([str(ROOT / "src"), str(ROOT), str(EXAMPLE), str(site)])
