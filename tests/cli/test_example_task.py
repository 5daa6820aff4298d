"""The example task package (examples/duorl-example-task) installed as a user would, then found by its
`duorl.tasks` entry point and by import path: `duorl tasks` lists it, `duorl train` learns it through the
real duo (spawned collector, mujoco backend) and `duorl play` plays it.

The package goes into a temporary folder (pip --target, offline, no dependencies), never into the shared
venv; the commands run as subprocesses with that folder on PYTHONPATH, so the spawned collector finds
the task again by its name.

example_reach, 50-step episodes, reward minus the distance (m) to the target: a uniform random policy
scores -13.4 and a zero policy -11.6 (64 envs, seed 0), a hand-written PD controller -1.0. With
LEARN below, SAC ended its 400 iterations at -3.75, -3.67 and -3.23 (training.seed 1, 2, 3; 12-17 s
each on the 2-core dev machine), and `duorl play --episodes 4` of the seed-1 run scored -1.50.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "duorl-example-task"
NAME = "example_reach"
IMPORT_PATH = "duorl_example_task:make_task"
RETURN_THRESHOLD = -7.0  # well above random (-13.4) and zero (-11.6) policies, below what SAC reaches (-3.23 .. -3.75)
LEARN = [
    "training.num_envs=16", "training.torch_threads=1", "sim.nthread=1", "training.log_interval=10",
    "training.progress=false", "training.no_play=true", "algo.max_iterations=400", "algo.batch_size=128",
    "algo.updates_per_step=2", "algo.policy_frequency=2", "algo.learning_starts=10", "algo.buffer_size=512",
    "algo.actor_hidden_dims=[64,64]", "algo.critic_hidden_dims=[64,64]", "algo.num_atoms=51",
    "algo.actor_lr=0.001", "algo.critic_lr=0.001", "algo.alpha_init=0.1", "algo.target_entropy_scale=-1.0",
]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example installed into a folder of its own (a copy is built: setuptools writes build/ beside
    the sources)."""
    tmp = tmp_path_factory.mktemp("example")
    src = tmp / "src"
    shutil.copytree(EXAMPLE, src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    target = tmp / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                        "--no-index", "--target", str(target), str(src)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return target


def _duorl(site: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(ROOT / "src")]), PYTHONUNBUFFERED="1")
    return subprocess.run([sys.executable, "-m", "duorl", *args], capture_output=True, text=True, timeout=300,
                          env=env, cwd=cwd)


def test_duorl_tasks_lists_the_example(site: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    """In this process, with the package's folder on sys.path (where importlib.metadata looks) and mjlab
    hidden, so the listing is the same whether mjlab is installed or not."""
    from duorl.cli.main import main
    from tests.envs.fake_tasks import hide_mjlab

    monkeypatch.syspath_prepend(str(site))
    hide_mjlab(monkeypatch)
    assert main(["tasks", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    rows = {t["name"]: t for t in listing["tasks"]}
    assert rows[NAME] == {"name": NAME, "source": "entry point duorl-example-task", "actor_obs_dim": 4,
                          "critic_obs_dim": 4, "action_dim": 2, "mirror": True, "status": "trainable",
                          "error": None}
    assert rows["pendulum_swingup"]["source"] == "builtin"
    assert listing["notes"] == ["mjlab: not installed (pip install 'duorl[mjlab]')"]
    assert main(["tasks"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["task", "actor", "obs", "critic", "obs", "action", "mirror", "source", "status"]
    line = next(x for x in table if x.startswith(NAME))
    assert line.split() == [NAME, "4", "4", "2", "yes", "entry", "point", "duorl-example-task",
                           "trainable"]
    assert table[-1] == "mjlab: not installed (pip install 'duorl[mjlab]')"
    # its own key (ReachConfig, the factory's config_class) is listed under its name, and set like any key
    assert main(["config", "--keys"]) == 0
    keys = capsys.readouterr().out.split(f"\n{NAME}:\n", 1)[1].splitlines()
    assert keys[0].split()[:4] == ["task.target_range", "float", "=", "0.3"]
    assert main(["config", "--reference"]) == 0
    assert f"### `{NAME}`" in capsys.readouterr().out
    assert main(["config", "--task", NAME, "--sim", "mujoco", "task.target_range=0.2"]) == 0
    assert "target_range: 0.2" in capsys.readouterr().out
    assert main(["config", "--task", NAME, "--sim", "mujoco", "task.robot_xml=g1.xml"]) == 2
    assert f"the task {NAME} does not declare task.robot_xml" in capsys.readouterr().err


def test_the_example_trains_by_entry_point_and_plays(site: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    r = _duorl(site, "train", "--task", NAME, "--sim", "mujoco", f"training.log_dir={run}", *LEARN)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    final = rows[-1]["Train/mean_episode_return"]
    print(f"{NAME}: final mean episode return {final:.2f} (threshold {RETURN_THRESHOLD})")
    assert final >= RETURN_THRESHOLD, final
    assert "Task/distance" in rows[-1]
    assert json.loads((run / "run_config.json").read_text())["task"]["name"] == NAME

    p = _duorl(site, "play", str(run), "--episodes", "4", "--json")
    assert p.returncode == 0, p.stderr[-3000:]
    played = json.loads(p.stdout)
    print(f"{NAME}: play mean return {played['mean_return']:.2f}")
    assert played["episodes"] == 4 and played["mean_length"] == 50.0
    assert played["mean_return"] >= RETURN_THRESHOLD and "distance" in played["metrics"]


def test_the_example_trains_by_import_path_with_its_mirror(site: Path, tmp_path: Path) -> None:
    """The import-path form, and algo.use_symmetry=true with the example's mirror; the default run
    directory's name keeps no colon."""
    from tests.conftest import TINY

    r = _duorl(site, "train", "--task", IMPORT_PATH, "--sim", "mujoco", *TINY, "algo.max_iterations=12",
               "algo.use_symmetry=true", "training.no_play=true", "task.target_range=0.2", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    (run,) = (tmp_path / "runs").iterdir()
    assert run.name.startswith("duorl_example_task_make_task-sac-")
    config = json.loads((run / "run_config.json").read_text())
    assert config["task"]["name"] == IMPORT_PATH and config["algo"]["use_symmetry"] is True
    assert config["task"]["target_range"] == 0.2  # its own key, through the spawned collector's pickle
    assert (run / "checkpoints" / "final.pt").is_file()
