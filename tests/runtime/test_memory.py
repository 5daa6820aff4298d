"""The memory check (runtime/memory.py): what each part of a duo needs, and which fix a refusal names;
the networks are counted from the configuration, so an absurd width is refused at once."""

from __future__ import annotations

import resource
import time
from pathlib import Path

import pytest
import torch

import duorl.runtime.memory as memory
from duorl.algos.sizes import NetworkSize
from duorl.runtime.memory import MemoryFixes, MemoryNeed, memory_problem

GIB = 2**30
FIXES = MemoryFixes(replay="REPLAY-FIX", networks="NETWORK-FIX", activations="ACTIVATION-FIX")


def test_each_part_of_the_need():
    actor, critic = NetworkSize(params=10, state=12, outputs_per_sample=5), NetworkSize(params=100, state=101, outputs_per_sample=7)
    need = MemoryNeed.of(1000, actor, critic, batch=4, envs=3)
    assert need.replay == 1000
    assert need.board == 4 * 2 * 12  # two slots of the actor's state
    assert need.learner == 4 * (12 + 2 * 101 + 3 * 110)  # networks, target critic, gradients and two moments
    assert need.collector == 4 * 12
    assert need.activations == 4 * 2 * (3 * 4 * (5 + 7) + 3 * 5)
    dp = MemoryNeed.of(1000, actor, critic, batch=4, envs=3, data_parallel=True)
    assert dp.learner - need.learner == 4 * 110  # the all-reduce's flat gradient buffers
    assert need.total == need.replay + need.board + need.learner + need.collector + need.activations


def _host(monkeypatch, ram_gib: float, shm_gib: float = 1000.0) -> None:
    monkeypatch.setattr(memory, "host_memory_available", lambda: int(ram_gib * GIB))
    monkeypatch.setattr(memory, "shared_memory_free", lambda: int(shm_gib * GIB))


@pytest.mark.parametrize("replay,learner,activations,ram,expect", [
    (1, 1, 1, 10, None),  # 3 GiB of 8 usable
    (1, 9, 1, 10, "NETWORK-FIX"),  # the networks alone do not fit
    (9, 1, 1, 10, "REPLAY-FIX"),  # the ring alone does not fit (though /dev/shm would take it)
    (1, 1, 9, 10, "ACTIVATION-FIX"),  # all but the activations fit: the batch is what to lower
])
def test_the_fix_is_the_part_that_does_not_fit(monkeypatch, replay, learner, activations, ram, expect):
    _host(monkeypatch, ram)
    need = MemoryNeed(replay * GIB, 0, learner * GIB, 0, activations * GIB)
    problem = memory_problem(torch.device("cpu"), need, FIXES)
    if expect is None:
        assert problem is None
    else:
        assert problem is not None and problem.endswith(f"Fix: {expect}") and f"{replay + learner + activations:.2f} GiB in all" in problem


def test_shared_memory_is_checked_on_its_own(monkeypatch):
    _host(monkeypatch, ram_gib=100, shm_gib=2)
    problem = memory_problem(torch.device("cpu"), MemoryNeed(2 * GIB, 0, 0, 0, 0), FIXES)
    assert problem is not None and "/dev/shm has 2.00 GiB free" in problem and problem.endswith("Fix: REPLAY-FIX")


def test_host_memory_is_the_smaller_of_meminfo_and_the_cgroup_limit(tmp_path: Path):
    (tmp_path / "meminfo").write_text("MemTotal: 100 kB\nMemAvailable:  8000 kB\n")
    assert memory.host_memory_available(str(tmp_path / "meminfo"), str(tmp_path)) == 8000 * 1024
    (tmp_path / "memory.max").write_text("4096000\n")
    (tmp_path / "memory.current").write_text("1024000\n")
    assert memory.host_memory_available(str(tmp_path / "meminfo"), str(tmp_path)) == 3072000
    (tmp_path / "memory.max").write_text("max\n")
    assert memory.host_memory_available(str(tmp_path / "meminfo"), str(tmp_path)) == 8000 * 1024


def test_an_actor_99999999_wide_is_refused_at_once(tmp_path, monkeypatch, capsys):
    """Issue 31: such an actor grew to 19 GB before it was killed. Counted from the configuration, it is
    refused in well under a second (imports warm), nothing allocated, no run directory."""
    from duorl.cli.main import main
    from tests.conftest import TINY

    monkeypatch.chdir(tmp_path)
    argv = ["train", "--algo", "sac", "--task", "pendulum_swingup", "--sim", "mujoco",
            *(o for o in TINY if "torch_threads" not in o), f"training.log_dir={tmp_path / 'run'}",
            "algo.actor_hidden_dims=[99999999]"]
    assert main(argv) == 2  # the first call pays the imports
    capsys.readouterr()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    assert main(argv) == 2
    took = time.perf_counter() - t0
    err = capsys.readouterr().err
    assert took < 1.0, took
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss < 200_000  # kB: nothing the size of a layer
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert "the networks" in err and "Fix: shrink the actor: lower algo.actor_hidden_dims=[99999999]" in err
    assert "799,999,994 parameters" in err
    assert not (tmp_path / "run").exists()
