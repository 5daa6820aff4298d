"""envs/task_sources.py: a task name resolves to one source (builtin, a `duorl.tasks` entry point, an
import path, mjlab:ID through duorl.envs.mjlab); a factory that breaks the Task contract is refused by
name; the spaces and symmetry checks."""

from __future__ import annotations

import functools
import pickle
from pathlib import Path

import pytest

from duorl.config.errors import ConfigError
from duorl.config.schema import SimConfig, TaskConfig
from duorl.envs import registry, task_sources
from duorl.envs.base import EnvSpec
from duorl.envs.mjlab import family as mjlab_family
from duorl.envs.task_sources import check_spec, check_symmetry, source_of, task_config
from duorl.envs.tasks.builtin import BUILTIN, DEFAULTS_DIR, DEFAULT_TASK
from tests.envs.fake_tasks import MJLAB_IDS, fake_distribution, fake_mjlab, hide_mjlab

FAKE = "tests.envs.fake_tasks"


def _spec(name: str, **values: object) -> EnvSpec:
    return source_of(name).spec(task_config(name, **values))


def _make_task(name: str, **values: object):  # type: ignore[no-untyped-def]
    return source_of(name).make_task(task_config(name, **values))


def test_builtin_tasks_are_the_task_yamls() -> None:
    """Builtin names are written once (envs/tasks/builtin.py); each ships defaults/NAME.yaml beside it."""
    assert sorted(BUILTIN) == sorted(p.stem for p in DEFAULTS_DIR.glob("*.yaml")) and DEFAULT_TASK in BUILTIN
    src = source_of("pendulum_swingup")
    assert (src.kind, src.label) == ("builtin", "builtin")
    assert src.defaults == DEFAULTS_DIR / "pendulum_swingup.yaml"
    assert _make_task("pendulum_swingup").spec.task == "pendulum_swingup"
    for name, b in BUILTIN.items():
        assert source_of(name).keys is b.keys and _spec(name).task == name


def test_a_source_states_its_facts() -> None:
    """What config is handed (config/tasks.TaskFacts) is read from the source, never from the name."""
    walk = source_of("g1_walk_flat").facts()
    assert walk.own_keys == ("task.robot_xml", "task.action_range", "task.penalty_curriculum")
    assert walk.defaults is not None and walk.label == "envs/tasks/defaults/g1_walk_flat.yaml"
    assert walk.tick_capturable and walk.sim is None and walk.check is not None
    lab = source_of("mjlab:Mjlab-Cartpole-Balance").facts()
    assert (lab.sim, lab.tick_capturable, lab.defaults, lab.own_keys) == ("mjwarp", False, None, ())
    assert lab.tick_eager_reason == mjlab_family.TICK_EAGER_REASON
    from duorl.envs.mjlab.vec_env import MjlabVecEnv  # the VecEnv it builds says the same

    assert MjlabVecEnv.tick_capturable is False and MjlabVecEnv.tick_eager_reason == lab.tick_eager_reason


def test_import_path_task_builds_and_its_factory_pickles() -> None:
    cfg = task_config(f"{FAKE}:pendulum", max_episode_steps=7)
    assert source_of(cfg.name).kind == "import path"
    assert source_of(cfg.name).spec(cfg).max_episode_steps == 7
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
        _spec(name)
    assert e.value.key == "task.name" and e.value.value == name
    for s in says:
        assert s in str(e.value), (s, str(e.value))


def test_unknown_names_list_the_closest() -> None:
    with pytest.raises(ConfigError, match="did you mean pendulum_swingup") as e:
        source_of("pendulum_swingap")
    assert "g1_walk_flat" in e.value.allowed


def test_a_package_task_declares_its_own_keys() -> None:
    """A factory's `config_class` declares its task's keys (docs/tasks.md): they reach the factory, and a
    class that is no TaskConfig dataclass, or a key without setting(), is refused naming the task."""
    name = f"{FAKE}:reach_with_keys"
    src = source_of(name)
    assert src.facts().own_keys == ("task.target_range",) and src.config().target_range == 0.3
    assert src.make_task(task_config(name, target_range=0.1)).target_range == 0.1
    for bad, says in ((f"{FAKE}:keys_not_a_dataclass", "not a dataclass extending TaskConfig"),
                      (f"{FAKE}:keys_without_help", r"declares gain without setting\(default, help\)")):
        with pytest.raises(ConfigError, match=says) as e:
            source_of(bad)
        assert e.value.key == "task.name" and e.value.value == bad


def test_spec_checks() -> None:
    spec = _make_task("pendulum_swingup").spec
    check_spec(spec, "x")
    for bad, says in (({"critic_obs_dim": 0}, "critic_obs_dim=0"), ({"actor_obs_dim": 2.0}, "actor_obs_dim=2.0"),
                      ({"control_dt": 0.0}, "control_dt=0.0")):
        with pytest.raises(ConfigError, match=says):
            check_spec(EnvSpec(**{**spec.__dict__, **bad}), "x")
    with pytest.raises(ConfigError, match="not an EnvSpec"):
        check_spec({"actor_obs_dim": 3}, "x")


def test_symmetry_needs_a_mirror() -> None:
    spec = _make_task("pendulum_swingup").spec
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
    assert _spec("fake_pendulum").action_dim == 1
    assert "fake_pendulum" in task_sources.task_names()
    with pytest.raises(ConfigError, match="the entry point fake_broken .no_such_module_xyz:make. fails to import"):
        source_of("fake_broken")
    # one source per name: a builtin's name, or a name two distributions register, is refused
    with pytest.raises(ConfigError, match="both a builtin task and an entry point of fakedist"):
        source_of("pendulum_swingup")
    fake_distribution(tmp_path, "otherdist", {"fake_pendulum": f"{FAKE}:wide_obs"})
    with pytest.raises(ConfigError, match="registered by several .* entry points: .*fakedist.*otherdist"):
        source_of("fake_pendulum")


# --------------------------------------------------------------------------------------------- mjlab
def test_mjlab_tasks_are_delegated(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list = []
    adapter = fake_mjlab(monkeypatch, calls)
    assert mjlab_family.PREFIX == adapter.PREFIX == "mjlab:"
    cfg = task_config("mjlab:Mjlab-Cartpole-Swingup")
    spec = registry.env_spec(cfg)
    assert (spec.actor_obs_dim, spec.critic_obs_dim, spec.action_dim) == (5, 7, 1)
    assert registry.make_vec_env(cfg, SimConfig(name="mjwarp"), 4, "cpu", 3, play=True) == "a VecEnv"
    assert registry.make_vec_env(cfg, SimConfig(name="mjwarp"), 1, "cpu", 3, play=True, render=True) == "a VecEnv"
    assert calls == [("Mjlab-Cartpole-Swingup", cfg.name, 4, "cpu", 3, True, False),
                     ("Mjlab-Cartpole-Swingup", cfg.name, 1, "cpu", 3, True, True)]
    with pytest.raises(ConfigError, match="unknown mjlab task id.*closest: mjlab:Mjlab-Cartpole-Swingup"):
        registry.env_spec(TaskConfig(name="mjlab:Mjlab-Cartpole-Swingap"))
    assert registry.make_task(cfg) is None  # a whole VecEnv, not a Task


def test_mjlab_not_installed_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    hide_mjlab(monkeypatch)
    with pytest.raises(ConfigError) as e:
        registry.env_spec(TaskConfig(name="mjlab:Mjlab-Cartpole-Swingup"))
    assert e.value.key == "task.name" and str(e.value).count("Fix: ") == 1
    assert e.value.fix == "pip install 'duorl[mjlab]'"


def test_listing_names_sizes_and_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_distribution(tmp_path, "fakedist", {"fake_pendulum": f"{FAKE}:pendulum", "fake_broken": f"{FAKE}:returns_none"})
    monkeypatch.syspath_prepend(str(tmp_path))
    hide_mjlab(monkeypatch)
    entries, notes = task_sources.list_tasks()
    rows = {e.name: e for e in entries}
    assert notes == ["mjlab: not installed (pip install 'duorl[mjlab]')"]
    assert (rows["fake_pendulum"].actor_obs_dim, rows["fake_pendulum"].source) == (3, "entry point fakedist")
    assert rows["g1_walk_flat"].mirror and (rows["g1_walk_flat"].action_dim, rows["g1_walk_flat"].source) == (29, "builtin")
    assert rows["fake_broken"].error is not None and "no duorl Task" in rows["fake_broken"].error
    fake_mjlab(monkeypatch, [])
    entries, notes = task_sources.list_tasks()
    mjlab = [e for e in entries if e.source == "mjlab"]
    assert notes == [] and [e.name for e in mjlab] == [f"mjlab:{i}" for i in MJLAB_IDS]
    assert (mjlab[0].actor_obs_dim, mjlab[0].critic_obs_dim, mjlab[0].action_dim) == (5, 7, 1)


def test_config_of_a_task_without_a_yaml(monkeypatch: pytest.MonkeyPatch) -> None:
    """Schema and algo YAML defaults only; an mjlab task gets sim.name=mjwarp unless --sim says otherwise,
    and --sim mujoco is refused."""
    from duorl.cli.configure import resolve_config

    fake_mjlab(monkeypatch, [])
    cfg, sources = resolve_config("sac", "mjlab:Mjlab-Cartpole-Swingup", None, [])
    assert (cfg.sim.name, sources["sim.name"]) == ("mjwarp", "auto")
    assert sources["training.num_envs"] == "algo" and not any(v == "task" for v in sources.values())
    with pytest.raises(ConfigError, match="sim.name=mujoco: the task mjlab:Mjlab-Cartpole-Swingup always steps MuJoCo Warp") as e:
        resolve_config("sac", "mjlab:Mjlab-Cartpole-Swingup", "mujoco", [])
    assert e.value.key == "sim.name"
    cfg, _ = resolve_config("sac", f"{FAKE}:pendulum", "mujoco", ["task.max_episode_steps=9"])
    assert cfg.task.name == f"{FAKE}:pendulum" and cfg.task.max_episode_steps == 9


def test_validation_checks_an_mjlab_name_without_its_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    """mjlab's task_spec builds the task once: config validation checks the install and the id only."""
    adapter = fake_mjlab(monkeypatch, [])
    monkeypatch.setattr(adapter, "task_spec", lambda task_id, cfg: pytest.fail("validation built an mjlab task's spec"))
    for name in ("mjlab:Mjlab-Cartpole-Balance", "mjlab:Mjlab-Cartpole"):
        facts = source_of(name).facts()
        assert facts.check is not None
        if name.endswith("Balance"):
            facts.check(task_config(name))
            continue
        with pytest.raises(ConfigError, match="unknown mjlab task id"):
            facts.check(task_config(name))


def test_an_mjlab_family_declares_keys_that_reach_mjlab(monkeypatch: pytest.MonkeyPatch) -> None:
    """A family's dataclass (envs/mjlab/family.py) gives its ids their own keys; a key declared with
    mjlab_key reaches that path of mjlab's env configuration when set, and the listings show it."""
    import dataclasses
    import types
    from typing import Optional

    @dataclasses.dataclass
    class TrackingKeys(mjlab_family.MjlabConfig):
        motion_file: Optional[str] = mjlab_family.mjlab_key(None, "mjlab tracking: the clip", "commands.motion.motion_file",
                                                            free_form=True, allowed="null or a path")

    family = mjlab_family.MjlabFamily("*-Tracking-*", lambda task_id: "-Tracking-" in task_id, TrackingKeys)
    monkeypatch.setattr(mjlab_family, "FAMILIES", (family,))
    src = source_of("mjlab:Mjlab-Tracking-Flat-Unitree-G1")
    assert src.keys is TrackingKeys and src.facts().own_keys == ("task.motion_file",)
    assert source_of("mjlab:Mjlab-Cartpole-Balance").keys is mjlab_family.MjlabConfig
    env_cfg = types.SimpleNamespace(commands={"motion": types.SimpleNamespace(motion_file="theirs.npz")})
    mjlab_family.apply_keys(src.config(), env_cfg)  # unset: mjlab's own value stays
    assert env_cfg.commands["motion"].motion_file == "theirs.npz"
    mjlab_family.apply_keys(src.config(motion_file="mine.npz"), env_cfg)
    assert env_cfg.commands["motion"].motion_file == "mine.npz"
    assert "mjlab:*-Tracking-*" in [t.name for t in task_sources.task_catalog().tasks]
