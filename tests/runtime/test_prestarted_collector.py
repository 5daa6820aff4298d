"""runtime/prestart.PrestartedCollector's messages with a real process: prepared and sent its env's arguments, it builds
its env, actor and first observation before any learner exists; one that no duo takes is ended, building
or built; its env's arguments go once; the environment set after its start reaches it."""

from __future__ import annotations

import functools
import time

import pytest

from duorl.algos.registry import make_actor
from duorl.cli.configure import load_config
from duorl.envs.registry import make_vec_env
from duorl.envs.task_sources import source_of
from duorl.runtime.control import COLLECTOR_PID
from duorl.runtime.prestart import PrestartedCollector


def _factories() -> tuple[functools.partial, functools.partial]:
    cfg = load_config("sac", "pendulum_swingup", "mujoco", ["training.num_envs=2", "algo.actor_hidden_dims=[8]",
                                                             "algo.critic_hidden_dims=[8]"])
    spec = source_of(cfg.task.name).spec(cfg.task)
    return (functools.partial(make_vec_env, cfg.task, cfg.sim, 2, "cpu", 1),
            functools.partial(make_actor, cfg.algo, spec))


@pytest.mark.slow
def test_a_prestarted_collector_builds_its_env_before_any_learner_and_a_cancel_ends_it() -> None:
    env_factory, actor_factory = _factories()
    pre = PrestartedCollector()
    try:
        with pytest.raises(RuntimeError, match="after its preparation"):
            pre.build(env_factory, actor_factory, "cpu", 1)  # its env's arguments come after its preparation
        pre.prepare(("duorl.envs.registry", "duorl.algos.registry"))
        with pytest.raises(RuntimeError, match="prepared once"):
            pre.prepare(())
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


def test_the_environment_set_after_the_start_reaches_the_collector_before_its_imports_ahead(
        tmp_path, monkeypatch) -> None:
    """A collector started before its learner read its configuration takes on what the learner set or removed
    since (the compile caches, MPS's pipe directory, a rank's devices) before anything imports them; torch
    was imported meanwhile, torch._dynamo (which reads the compile caches' variables) was not."""
    import json

    monkeypatch.setenv("DUORL_TEST_GONE", "early")
    monkeypatch.setenv("DUORL_TEST_KEPT", "kept")
    pre = PrestartedCollector()
    try:
        probe = tmp_path / "probe.json"
        monkeypatch.delenv("DUORL_TEST_GONE")
        monkeypatch.setenv("DUORL_TEST_SET", "late")
        monkeypatch.setenv("DUORL_TEST_PROBE", str(probe))
        pre.prepare(("tests.runtime.env_probe:record",))
        deadline = time.monotonic() + 120
        while not probe.exists() and time.monotonic() < deadline:
            assert pre.process.is_alive()
            time.sleep(0.05)
        seen = json.loads(probe.read_text())
        assert seen == {"DUORL_TEST_SET": "late", "DUORL_TEST_GONE": None, "DUORL_TEST_KEPT": "kept",
                        "torch_imported_before": True, "dynamo_imported_before": False}
        assert pre.send_error is None
    finally:
        pre.cancel()
    assert not pre.process.is_alive()


_STOP_DURING_THE_START = """
import multiprocessing.context, os, signal, sys, time
from duorl.runtime.prestart import PrestartedCollector
got = []
signal.signal(signal.SIGINT, lambda signum, frame: got.append(signum))
start = multiprocessing.context.SpawnProcess.start
def start_with_a_stop(self):  # the Ctrl-C lands while the child is being spawned
    os.kill(os.getpid(), signal.SIGINT)
    start(self)
multiprocessing.context.SpawnProcess.start = start_with_a_stop
pre = PrestartedCollector()
os.kill(pre.process.pid, signal.SIGINT)  # the same Ctrl-C reaching the child (its group) while its interpreter starts
deadline = time.monotonic() + 5
while not got and time.monotonic() < deadline:
    time.sleep(0.01)
blocked = signal.pthread_sigmask(signal.SIG_BLOCK, set())
time.sleep(1.0)  # the child's interpreter starts: the held SIGINT reaches it as ignored, it lives on
alive = pre.process.is_alive()
pre.cancel()
print(got == [signal.SIGINT], signal.SIGINT not in blocked, alive)
"""


def test_a_stop_while_the_collector_is_spawned_reaches_this_process_and_spares_the_collector() -> None:
    """CI: `duorl train` starts its collector first thing, and a Ctrl-C 0.3 s after the command began
    landed while the spawn ignored SIGINT in this process too: lost, and the run went on (a data-parallel
    launcher until the test's timeout). Now the spawn holds the signals: this process's handler gets the
    stop, its mask is back, and the child, holding it until its own handlers exist, is not killed by it."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("DUORL_PARENT_PID", "TORCHELASTIC_RUN_ID")}
    p = subprocess.run([sys.executable, "-c", _STOP_DURING_THE_START], capture_output=True, text=True,
                       timeout=120, env=env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["True", "True", "True"], (p.stdout, p.stderr)
    assert "Traceback" not in p.stderr, p.stderr
