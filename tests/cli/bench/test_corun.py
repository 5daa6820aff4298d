"""`duorl bench corun` on the CPU: real side processes over one window, the capacity bound's arithmetic,
and the refusals that come before any process starts."""

from __future__ import annotations

import json
import os

import pytest

from duorl.cli.bench.corun import capacity_bounds
from duorl.cli.main import main

TINY = ["training.num_envs=8", "algo.batch_size=32", "algo.updates_per_step=1", "algo.actor_hidden_dims=[16]",
        "algo.critic_hidden_dims=[16]"]


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.slow
def test_corun_times_each_side_in_its_own_process(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    out = tmp_path / "corun.json"
    argv = ["bench", "corun", "--algo", "sac", "--task", "pendulum_swingup", "--sim", "mujoco", "--device", "cpu",
            "--window-s", "1", "--warmup", "1", "--arms", "learner,collector,both", "--out", str(out), *TINY]
    assert main(argv) == 0
    r = json.loads(out.read_text())
    assert set(r["arms"]) == {"learner", "collector", "both"}
    assert set(r["arms"]["both"]) == {"learner", "collector"}
    pids = {side["pid"] for arm in r["arms"].values() for side in arm.values()}
    assert len(pids) == 4 and os.getpid() not in pids and all(_gone(p) for p in pids)
    for arm in r["arms"].values():
        for side in arm.values():
            assert side["steps"] > 0 and side["mean_ms"] > 0
    assert r["arms"]["collector"]["collector"]["env_steps_per_s"] > 0
    alone = r["arms"]["learner"]["learner"]["mean_ms"] + r["arms"]["collector"]["collector"]["mean_ms"]
    slower = max(s["mean_ms"] for s in r["arms"]["both"].values())
    assert r["serial_ms"] == pytest.approx(alone, abs=1e-3)
    assert r["both_capacity_bound"] == pytest.approx(alone / slower, rel=1e-3)


def test_capacity_bound_arithmetic() -> None:
    side = lambda name, ms: {name: {"mean_ms": ms}}  # noqa: E731
    arms = {"learner": side("learner", 16.7), "collector": side("collector", 11.8),
            "both": {"learner": {"mean_ms": 35.3}, "collector": {"mean_ms": 25.1}},
            "both_mps": {"learner": {"mean_ms": 25.6}, "collector": {"mean_ms": 23.6}}}
    b = capacity_bounds(arms)
    assert b["serial_ms"] == pytest.approx(28.5)
    assert b["both_capacity_bound"] == pytest.approx(28.5 / 35.3, abs=1e-4)
    assert b["both_mps_capacity_bound"] == pytest.approx(28.5 / 25.6, abs=1e-4)
    assert b["mps_gain"] == pytest.approx(35.3 / 25.6, abs=1e-4)


@pytest.mark.parametrize("extra,needle", [
    (["--arms", "both_mps"], "both_mps needs a CUDA device"),
    (["--arms", "learner,nope"], "--arms"),
    (["--window-s", "0"], "--window-s"),
    (["algo.no_such_key=1"], "algo.no_such_key"),
])
def test_corun_refuses_before_starting(capsys: pytest.CaptureFixture[str], extra: list[str], needle: str) -> None:
    argv = ["bench", "corun", "--task", "pendulum_swingup", "--sim", "mujoco", "--device", "cpu", *extra]
    assert main(argv) == 2
    assert needle in capsys.readouterr().err


def test_corun_refuses_an_mps_arm_this_machine_cannot_start_before_any_arm(monkeypatch: pytest.MonkeyPatch,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """With CUDA but no way to start an MPS daemon (here: no nvidia-smi, faked on any machine), the
    both_mps arm is refused before the learner, collector and both arms spend their windows."""
    import torch

    import duorl.cli.bench.corun as corun
    import duorl.mps.daemon as daemon

    def no_smi(_args: list[str]) -> str:
        raise daemon.MpsCommandError("nvidia-smi not found: CUDA MPS needs an NVIDIA driver on this machine")

    def no_arm(*_a: object, **_k: object) -> None:
        raise AssertionError("an arm ran before the MPS arm was checked")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(daemon, "_nvidia_smi", no_smi)
    monkeypatch.setattr(corun, "_run_arm", no_arm)
    assert main(["bench", "corun", "--task", "pendulum_swingup", "--sim", "mujoco"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --arms=learner,collector,both,both_mps: both_mps starts a CUDA MPS daemon, and "
                          "nvidia-smi not found") and "Fix: leave both_mps out" in err and err.count("\n") == 1
