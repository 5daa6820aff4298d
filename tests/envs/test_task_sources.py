"""envs/task_sources.py: a task name resolves to one source (builtin, a `duorl.tasks` entry point, an
import path, mjlab:ID through duorl.envs.mjlab); a factory that breaks the Task contract is refused by
name; the spaces and symmetry checks."""

from __future__ import annotations

import functools
import pickle
import sys
from pathlib import Path

import pytest

from duorl.config.errors import ConfigError
from duorl.config.schema import SimConfig, TaskConfig
from duorl.envs import registry, task_sources
from duorl.envs.base import EnvSpec
from duorl.envs.task_sources import check_spec, check_symmetry, make_task, probe_task, source_of, task_spec
from tests.envs.fake_tasks import MJLAB_IDS, fake_distribution, fake_mjlab_module

FAKE = "tests.envs.fake_tasks"


def test_builtin_tasks_are_the_task_yamls() -> None:
    from duorl.config.catalog import yaml_task_names

    assert sorted(task_sources.BUILTIN) == yaml_task_names() == sorted(registry.TASKS)
    src = source_of("pendulum_swingup")
    assert (src.kind, src.label) == ("builtin", "builtin")
    assert make_task(TaskConfig()).spec.task == "pendulum_swingup"


def test_import_path_task_builds_and_its_factory_pickles() -> None:
    cfg = TaskConfig(name=f"{FAKE}:pendulum", max_episode_steps=7)
    assert source_of(cfg.name).kind == "import path"
    assert task_spec(cfg).max_episode_steps == 7
    # what train ships to the spawned collector: only the name, resolved again there
    factory = functools.partial(registry.make_vec_env, cfg, SimConfig(name="mujoco", nthread=1), 2, "cpu", 0)
    env = pickle.loads(pickle.dumps(factory))()
    try:
        assert env.reset()["actor"].shape == (2, 3)
    finally:
        env.close()


@pytest.mark.parametrize("name,says", [
    (f"{FAKE}_broken:make", ["fails to import", "RuntimeError: broken on purpose"]),
    ("no_such_module_xyz:make", ["fails to import", "ModuleNotFoundError", "PYTHONPATH"]),
    (f"{FAKE}:pendulm", ["has no attribute pendulm", f"{FAKE}:pendulum"]),
    (f"{FAKE}:NOT_CALLABLE", ["is a int, not callable"]),
    (f"{FAKE}:returns_none", ["returned a NoneType, which is no duorl Task", "lacks spec"]),
    (f"{FAKE}:raises", ["raised RuntimeError: no robot model here"]),
    (f"{FAKE}:zero_action", ["cannot train its spaces: action_dim=0"]),
    ("a.b:c:d", ["not an import path"]),
])
def test_broken_factories_are_refused_by_name(name: str, says: list[str]) -> None:
    with pytest.raises(ConfigError) as e:
        task_spec(TaskConfig(name=name))
    assert e.value.key == "task.name" and e.value.value == name
    for s in says:
        assert s in str(e.value), (s, str(e.value))


def test_unknown_names_list_the_closest() -> None:
    with pytest.raises(ConfigError, match="did you mean pendulum_swingup") as e:
        source_of("pendulum_swingap")
    assert "g1_walk_flat" in e.value.allowed


@pytest.mark.parametrize("factory,says", [
    ("int_obs", "obs['actor'] is torch.int64 (2, 3), the spec says float32 (2, 3)"),
    ("wide_obs", "obs['critic'] is torch.float32 (2, 4), the spec says float32 (2, 3)"),
])
def test_the_probe_steps_a_task_against_the_contract(factory: str, says: str) -> None:
    with pytest.raises(ConfigError, match="duorl cannot train it") as e:
        probe_task(TaskConfig(name=f"{FAKE}:{factory}"))
    assert says in str(e.value)
    probe_task(TaskConfig(name=f"{FAKE}:pendulum"))  # a task that keeps the contract passes


def test_spec_checks() -> None:
    spec = make_task(TaskConfig()).spec
    check_spec(spec, "x")
    for bad, says in (({"critic_obs_dim": 0}, "critic_obs_dim=0"), ({"actor_obs_dim": 2.0}, "actor_obs_dim=2.0"),
                      ({"control_dt": 0.0}, "control_dt=0.0")):
        with pytest.raises(ConfigError, match=says):
            check_spec(EnvSpec(**{**spec.__dict__, **bad}), "x")
    with pytest.raises(ConfigError, match="not an EnvSpec"):
        check_spec({"actor_obs_dim": 3}, "x")


def test_symmetry_needs_a_mirror() -> None:
    spec = make_task(TaskConfig()).spec
    check_symmetry(spec, False)
    with pytest.raises(ConfigError, match="algo.use_symmetry=true: needs a task that describes its left-right mirror"):
        check_symmetry(spec, True)


def test_entry_points(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_distribution(tmp_path, "fakedist", {"fake_pendulum": f"{FAKE}:pendulum", "fake_broken": "no_such_module_xyz:make",
                                 "pendulum_swingup": f"{FAKE}:pendulum"})
    monkeypatch.syspath_prepend(str(tmp_path))
    src = source_of("fake_pendulum")
    assert (src.kind, src.dist, src.target, src.label) == ("entry point", "fakedist", f"{FAKE}:pendulum",
                                                          "entry point fakedist")
    assert task_spec(TaskConfig(name="fake_pendulum")).action_dim == 1
    assert "fake_pendulum" in task_sources.task_names()
    with pytest.raises(ConfigError, match="the entry point fake_broken .no_such_module_xyz:make. fails to import"):
        task_spec(TaskConfig(name="fake_broken"))
    # one source per name: a builtin's name, or a name two distributions register, is refused
    with pytest.raises(ConfigError, match="both a builtin task and an entry point of fakedist"):
        make_task(TaskConfig(name="pendulum_swingup"))
    fake_distribution(tmp_path, "otherdist", {"fake_pendulum": f"{FAKE}:wide_obs"})
    with pytest.raises(ConfigError, match="registered by several .* entry points: .*fakedist.*otherdist"):
        source_of("fake_pendulum")


# --------------------------------------------------------------------------------------------- mjlab
def test_mjlab_tasks_are_delegated(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list = []
    monkeypatch.setitem(sys.modules, "duorl.envs.mjlab", fake_mjlab_module(calls))
    assert task_sources.MJLAB_PREFIX == sys.modules["duorl.envs.mjlab"].PREFIX
    cfg = TaskConfig(name="mjlab:Mjlab-Cartpole-Swingup")
    spec = registry.env_spec(cfg)
    assert (spec.actor_obs_dim, spec.critic_obs_dim, spec.action_dim) == (5, 7, 1)
    assert registry.make_vec_env(cfg, SimConfig(name="mjwarp"), 4, "cpu", 3, play=True) == "a VecEnv"
    assert registry.make_vec_env(cfg, SimConfig(name="mjwarp"), 1, "cpu", 3, play=True, render=True) == "a VecEnv"
    assert calls == [("Mjlab-Cartpole-Swingup", cfg.name, 4, "cpu", 3, True, False),
                     ("Mjlab-Cartpole-Swingup", cfg.name, 1, "cpu", 3, True, True)]
    with pytest.raises(ConfigError, match="unknown mjlab task id.*closest: mjlab:Mjlab-Cartpole-Swingup"):
        registry.env_spec(TaskConfig(name="mjlab:Mjlab-Cartpole-Swingap"))
    with pytest.raises(ConfigError, match="a whole VecEnv, not a Task"):
        registry.make_task(cfg)


@pytest.mark.parametrize("how", ["no adapter module", "mjlab missing"])
def test_mjlab_not_installed_names_the_install_command(how: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "duorl.envs.mjlab", None if how == "no adapter module" else fake_mjlab_module([], False))
    with pytest.raises(ConfigError) as e:
        registry.env_spec(TaskConfig(name="mjlab:Mjlab-Cartpole-Swingup"))
    assert e.value.key == "task.name" and str(e.value).count("Fix: ") == 1
    assert e.value.fix == "pip install 'duorl[mjlab]'"


def test_listing_names_sizes_and_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_distribution(tmp_path, "fakedist", {"fake_pendulum": f"{FAKE}:pendulum", "fake_broken": f"{FAKE}:returns_none"})
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(sys.modules, "duorl.envs.mjlab", None)
    entries, notes = task_sources.list_tasks()
    rows = {e.name: e for e in entries}
    assert notes == ["mjlab: not installed (pip install 'duorl[mjlab]')"]
    assert (rows["fake_pendulum"].actor_obs_dim, rows["fake_pendulum"].source) == (3, "entry point fakedist")
    assert rows["g1_walk_flat"].mirror and (rows["g1_walk_flat"].action_dim, rows["g1_walk_flat"].source) == (29, "builtin")
    assert rows["fake_broken"].error is not None and "no duorl Task" in rows["fake_broken"].error
    monkeypatch.setitem(sys.modules, "duorl.envs.mjlab", fake_mjlab_module([]))
    entries, notes = task_sources.list_tasks()
    mjlab = [e for e in entries if e.source == "mjlab"]
    assert notes == [] and [e.name for e in mjlab] == [f"mjlab:{i}" for i in MJLAB_IDS]
    assert (mjlab[0].actor_obs_dim, mjlab[0].critic_obs_dim, mjlab[0].action_dim) == (5, 7, 1)


def test_config_of_a_task_without_a_yaml(monkeypatch: pytest.MonkeyPatch) -> None:
    """Schema and algo YAML defaults only; an mjlab task gets sim.name=mjwarp unless --sim says otherwise,
    and --sim mujoco is refused."""
    from duorl.config.load import resolve_config

    monkeypatch.setitem(sys.modules, "duorl.envs.mjlab", fake_mjlab_module([]))
    cfg, sources = resolve_config("sac", "mjlab:Mjlab-Cartpole-Swingup", None, [])
    assert (cfg.sim.name, sources["sim.name"]) == ("mjwarp", "auto")
    assert sources["training.num_envs"] == "algo" and not any(v == "task" for v in sources.values())
    with pytest.raises(ConfigError, match="sim.name=mujoco: an mjlab task .* always steps MuJoCo Warp") as e:
        resolve_config("sac", "mjlab:Mjlab-Cartpole-Swingup", "mujoco", [])
    assert e.value.key == "sim.name"
    cfg, _ = resolve_config("sac", f"{FAKE}:pendulum", "mujoco", ["task.max_episode_steps=9"])
    assert cfg.task.name == f"{FAKE}:pendulum" and cfg.task.max_episode_steps == 9


def test_validation_checks_an_mjlab_name_without_its_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    """mjlab's task_spec builds the task once: config validation checks the install and the id only."""
    fake = fake_mjlab_module([])
    fake.task_spec = lambda task_id, cfg: pytest.fail("validation built an mjlab task's spec")  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "duorl.envs.mjlab", fake)
    task_sources.check_task(TaskConfig(name="mjlab:Mjlab-Cartpole-Balance"))
    with pytest.raises(ConfigError, match="unknown mjlab task id"):
        task_sources.check_task(TaskConfig(name="mjlab:Mjlab-Cartpole"))
