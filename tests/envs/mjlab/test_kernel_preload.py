"""The Warp preload of an mjlab env's build (envs/mjlab/kernel_preload.py), on Warp's CPU device: the env
it builds is the env built without it (observations bit for bit), a listing that raises still builds the
env, and the start-up timeline records the preload."""

from __future__ import annotations

import pytest
import torch

from duorl.config.schema import TaskConfig
from duorl.startup_phases import PHASES

CARTPOLE = "Mjlab-Cartpole-Swingup"


def _rollout(monkeypatch: pytest.MonkeyPatch, threads: str, steps: int = 4) -> list[torch.Tensor]:
    """The actor observations after reset and after each of `steps` steps of a 2-env swing-up."""
    from duorl.envs import mjlab

    monkeypatch.setenv("DUORL_WARP_COMPILE_THREADS", threads)
    env = mjlab.make_vec_env(CARTPOLE, TaskConfig(name=f"mjlab:{CARTPOLE}"), 2, "cpu", seed=3)
    try:
        gen = torch.Generator().manual_seed(1)
        seen = [env.reset()["actor"].clone()]
        for _ in range(steps):
            obs, *_ = env.step(torch.rand(2, env.spec.action_dim, generator=gen) * 2 - 1)
            seen.append(obs["actor"].clone())
    finally:
        env.close()
    return seen


def _phases_since(n: int) -> dict[str, dict]:
    return {p.name: p.detail for p in PHASES.phases[n:]}


def test_the_preloaded_env_is_the_env_built_without_it(monkeypatch: pytest.MonkeyPatch) -> None:
    without = _rollout(monkeypatch, "0")
    n = len(PHASES.phases)
    with_preload = _rollout(monkeypatch, "2")
    phases = _phases_since(n)
    assert phases["warp modules listed"]["modules"] > 0  # the preload ran, and listed the physics' modules
    assert phases["warp modules preloaded"]["workers"] == 2.0
    for a, b in zip(without, with_preload):
        assert torch.equal(a, b)


def test_preload_off_records_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    n = len(PHASES.phases)
    _rollout(monkeypatch, "0", steps=1)
    assert "warp modules listed" not in _phases_since(n)


def test_a_listing_that_raises_still_builds_the_env(monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from duorl.envs.backends import warp_preload

    def broken(step):
        raise RuntimeError("recorder broke")

    reference = _rollout(monkeypatch, "0", steps=2)
    monkeypatch.setattr(warp_preload, "step_modules", broken)
    n = len(PHASES.phases)
    seen = _rollout(monkeypatch, "2", steps=2)
    assert "warp modules listed" not in _phases_since(n)
    assert "recorder broke" in capsys.readouterr().err
    for a, b in zip(reference, seen):
        assert torch.equal(a, b)
