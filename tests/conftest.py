import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

# duorl's Triton kernels (gpu/fused_norm.py, gpu/column_stats.py) run on the CPU through Triton's
# interpreter, which Triton reads when it is first imported (torch may import it early): without a GPU
# the tests turn it on before anything can import Triton (tests/gpu/triton_util.py)
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

# a tiny, fast configuration of the real duo (spawned collector, mujoco backend, SAC learner)
TINY = [
    "training.num_envs=4",
    "training.progress=false",
    "training.torch_threads=1",
    "sim.nthread=1",
    "algo.batch_size=32",
    "algo.updates_per_step=2",
    "algo.policy_frequency=2",
    "algo.learning_starts=4",
    "algo.buffer_size=64",
    "algo.actor_hidden_dims=[32,32]",
    "algo.critic_hidden_dims=[32,32]",
    "algo.num_atoms=11",
]


def duorl_cmd(run_dir: Path, *overrides: str, algo: str = "sac", task: str = "pendulum_swingup", sim: str = "mujoco") -> list[str]:
    return [
        sys.executable,
        "-m",
        "duorl",
        "train",
        "--algo",
        algo,
        "--task",
        task,
        "--sim",
        sim,
        f"training.log_dir={run_dir}",
        *TINY,
        *overrides,
    ]


def run_duorl(run_dir: Path, *overrides: str, timeout: float = 300, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(duorl_cmd(run_dir, *overrides, **kw), capture_output=True, text=True, timeout=timeout, env=_env())


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    return env


@pytest.fixture
def duorl_env() -> dict[str, str]:
    return _env()


def pytest_collection_modifyitems(config, items):
    # The learning runs (marked learning_run, test_learning.py) take 2-5 minutes each in the suite, collected
    # near the end; started first, they run beside the short tests instead of leaving the last one running
    # alone on one of the two workers (make test: `-n 2 --dist worksteal`). A stable sort: the rest keep
    # their order (a module's tests stay together, so its module-scoped fixtures are built once).
    items.sort(key=lambda item: item.get_closest_marker("learning_run") is None)
