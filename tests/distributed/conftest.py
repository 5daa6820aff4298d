"""Data parallel with real processes over gloo: CPU ranks, each with its own learner and collector.

Runs are tiny (the duo TINY config, 2 ranks), single-threaded, with short process-group timeouts and
hard timeouts on every wait; the tests check that every PID of a run is gone at the end.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import TINY
from tests.runtime.faults import alive, assert_all_gone  # noqa: F401 - re-exported to the data-parallel tests

DP = [
    "training.devices=[cpu,cpu]",
    "training.dp_timeout_s=60",
    "training.dp_startup_timeout_s=120",
]


def dp_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
    return env


def train_args(run_dir: Path, *overrides: str, algo: str = "sac") -> list[str]:
    return ["train", "--algo", algo, "--task", "pendulum_swingup", "--sim", "mujoco", f"training.log_dir={run_dir}",
            *TINY, *DP, *overrides]


def launcher_cmd(run_dir: Path, *overrides: str, algo: str = "sac") -> list[str]:
    return [sys.executable, "-m", "duorl", *train_args(run_dir, *overrides, algo=algo)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun_cmd(run_dir: Path, *overrides: str, nproc: int = 2, nnodes: int = 1, node_rank: int = 0,
                 port: int | None = None, algo: str = "sac") -> list[str]:
    port = port or free_port()
    return [sys.executable, "-m", "torch.distributed.run", f"--nnodes={nnodes}", f"--node-rank={node_rank}",
            f"--nproc-per-node={nproc}", "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}",
            "--max-restarts=0", "-m", "duorl", *train_args(run_dir, *overrides, algo=algo)]


def run(cmd: list[str], timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=dp_env())


def start(cmd: list[str]) -> subprocess.Popen:
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dp_env(),
                            start_new_session=True)


def summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "run_summary.json").read_text())


def wait_for_ranks(run_dir: Path, proc: subprocess.Popen, iterations: int, timeout: float = 120) -> dict:
    """The run summary once every rank is in the manifest and `iterations` rows are logged."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"the run ended early ({proc.returncode}): {err[-3000:]}")
        metrics = run_dir / "metrics.jsonl"
        if metrics.exists() and len(metrics.read_text().splitlines()) >= iterations:
            s = summary(run_dir)
            if len(s["runtime_manifest"].get("ranks", [])) >= 2:
                return s
        time.sleep(0.2)
    raise AssertionError(f"no {iterations} logged iterations within {timeout} s")


def run_pids(s: dict) -> list[int]:
    return [pid for r in s["runtime_manifest"]["ranks"] for pid in (r["learner_pid"], r["collector_pid"])]


def kill_group(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=10)
