"""runtime/duo.PrestartedCollector's two messages with a real process: sent its env's arguments, it builds
its env, actor and first observation before any learner exists; one that no duo takes is ended, building
or built; and its env's arguments go once."""

from __future__ import annotations

import functools
import time

import pytest

from duorl.algos.registry import make_actor
from duorl.cli.configure import load_config
from duorl.envs.registry import make_vec_env
from duorl.envs.task_sources import source_of
from duorl.runtime.control import COLLECTOR_PID
from duorl.runtime.duo import PrestartedCollector


def _factories() -> tuple[functools.partial, functools.partial]:
    cfg = load_config("sac", "pendulum_swingup", "mujoco", ["training.num_envs=2", "algo.actor_hidden_dims=[8]",
                                                             "algo.critic_hidden_dims=[8]"])
    spec = source_of(cfg.task.name).spec(cfg.task)
    return (functools.partial(make_vec_env, cfg.task, cfg.sim, 2, "cpu", 1),
            functools.partial(make_actor, cfg.algo, spec))


@pytest.mark.slow
def test_a_prestarted_collector_builds_its_env_before_any_learner_and_a_cancel_ends_it() -> None:
    env_factory, actor_factory = _factories()
    pre = PrestartedCollector(("duorl.envs.registry", "duorl.algos.registry"))
    try:
        pre.build(env_factory, actor_factory, "cpu", 1)
        assert pre.control is not None
        with pytest.raises(RuntimeError, match="once"):
            pre.build(env_factory, actor_factory, "cpu", 1)
        deadline = time.monotonic() + 120
        # the device it opened is written after its actor and first observation: all built, no learner
        while pre.control.read_device() != "cpu" and time.monotonic() < deadline:
            assert pre.process.is_alive(), pre.control.read_error()
            time.sleep(0.05)
        assert pre.control.read_device() == "cpu"
        assert pre.began_building() and pre.control.get(COLLECTOR_PID) == pre.process.pid
        assert not pre.control.read_error()
        t0 = time.monotonic()
        pre.cancel()  # no duo took it: it is ended, built env and all
        assert not pre.process.is_alive() and time.monotonic() - t0 < 10
    finally:
        if pre.process.is_alive():
            pre.process.kill()
