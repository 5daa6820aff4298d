"""load_config(): layering, override types, error wrapping, serialisation."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

import duorl.config.load as load_mod
from duorl.cli.configure import load_config
from duorl.config import Config, ConfigError, config_hash, config_to_dict
from duorl.config.catalog import DEFAULTS_DIR
from duorl.config.schema import AlgoConfig, TrainingConfig
from duorl.config.tasks import TaskFacts
from duorl.envs.task_sources import source_of
from duorl.envs.tasks.builtin import BUILTIN, defaults_of
from duorl.envs.tasks.keys import PendulumConfig

ALGO, TASK = "sac", "pendulum_swingup"


def _with_yaml(path: Path) -> TaskFacts:
    """The pendulum's facts with another YAML layer (config.load takes a task's facts, not its name)."""
    return TaskFacts(TASK, PendulumConfig, defaults=path)


def _error(overrides: list[str], **kw: object) -> ConfigError:
    task = kw.get("task", TASK)
    load = load_mod.load_config if isinstance(task, TaskFacts) else load_config
    with pytest.raises(ConfigError) as info:
        load(kw.get("algo", ALGO), task, kw.get("sim", "mujoco"), overrides)  # type: ignore[arg-type]
    return info.value


def test_returns_a_plain_picklable_dataclass() -> None:
    cfg = load_config(ALGO, TASK, "mujoco", [])
    assert type(cfg) is Config and type(cfg.training) is TrainingConfig and type(cfg.algo) is AlgoConfig
    assert type(cfg.algo.actor_hidden_dims) is list
    assert pickle.loads(pickle.dumps(cfg)) == cfg
    assert (cfg.algo.name, cfg.task.name, cfg.sim.name) == (ALGO, TASK, "mujoco")


def test_shipped_pendulum_defaults() -> None:
    cfg = load_config(ALGO, TASK, "mujoco", [])
    assert cfg.training.num_envs == 16  # task YAML beats sac.yaml's 4096
    assert cfg.algo.batch_size == 256 and cfg.algo.gamma == 0.99
    assert cfg.algo.actor_hidden_dims == [128, 128] and cfg.algo.v_max == 110.0
    assert cfg.algo.alpha_init == 0.1  # from algo_by_name.sac
    assert cfg.algo.num_atoms == 101  # from sac.yaml, untouched by the task


def test_shipped_g1_walk_defaults() -> None:
    """g1_walk_flat ships the settings that walked on the H200 (benchmarks/2026-11-29_g1_walk_fastsac_h200_15min_low_entropy/): the
    published FastSAC G1 action range, a target entropy of -2.0 per action dimension for sac and a target
    std of 0.03 for flashsac and warpsac, which also run 50000 iterations;
    the tracking task uses the same range (issue 22: under pd real clips need |action| up to 4-6), and a
    command-line override still wins."""
    sac = load_config(ALGO, "g1_walk_flat", "mujoco", [])
    assert sac.task.action_range == "joint_limits" and sac.algo.target_entropy_scale == -2.0
    assert sac.algo.use_symmetry is True and sac.task.penalty_curriculum is None  # the task's own (ppo)
    for name in ("flashsac", "warpsac"):  # less noise too (benchmarks/2026-11-30_g1_walk_flashsac_h200/)
        flash = load_config(name, "g1_walk_flat", "mujoco", [])
        assert flash.task.action_range == "joint_limits" and flash.algo.target_entropy_std == 0.03
        assert flash.algo.max_iterations == 50000
    track = load_config("flashsac", "g1_motion_tracking", "mujoco", []).algo
    assert track.target_entropy_std == 0.15
    for name in ("sac", "flashsac", "warpsac"):  # a G1 run must not end after seconds of a GPU
        assert load_config(name, "g1_motion_tracking", "mujoco", []).algo.max_iterations == 400000
    assert load_config(ALGO, "g1_motion_tracking", "mujoco", []).task.action_range == "joint_limits"
    pd = load_config(ALGO, "g1_walk_flat", "mujoco", ["task.action_range=pd", "algo.target_entropy_scale=0"])
    assert pd.task.action_range == "pd" and pd.algo.target_entropy_scale == 0.0


def test_override_types() -> None:
    cfg = load_config(ALGO, TASK, "mujoco", [
        "training.devices=[cpu]", "algo.gamma=0.9", "algo.v_min=-5", "algo.actor_hidden_dims=[64,32]",
        "training.log_dir=/tmp/run x", "training.cuda_process_sharing=null", "training.progress=false",
        "task.max_episode_steps=100", "algo.algo_params.dp_whole_cycle_cuda_graph=false", "algo.batch_size=64",
    ])
    assert cfg.training.devices == ["cpu"]
    assert cfg.algo.gamma == 0.9 and type(cfg.algo.v_min) is float and cfg.algo.v_min == -5.0
    assert cfg.algo.actor_hidden_dims == [64, 32] and all(type(d) is int for d in cfg.algo.actor_hidden_dims)
    assert cfg.training.log_dir == "/tmp/run x"
    assert cfg.training.cuda_process_sharing is None and cfg.training.progress is False
    assert cfg.task.max_episode_steps == 100 and cfg.algo.algo_params.dp_whole_cycle_cuda_graph is False
    assert type(cfg.algo.batch_size) is int and cfg.algo.batch_size == 64


def test_yaml_boolean_words_stay_words_for_text_keys() -> None:
    """YAML reads off/on/yes/no as booleans; a text key gets the word as typed (the `off` penalty
    curriculum was refused as False before), a boolean key still gets the boolean."""
    cfg = load_config(ALGO, "g1_walk_flat", "mujoco", ["task.penalty_curriculum=off", "training.progress=off"])
    assert cfg.task.penalty_curriculum == "off"
    assert cfg.training.progress is False
    with pytest.raises(ConfigError, match="training.cuda_process_sharing=no"):
        load_config(ALGO, TASK, "mujoco", ["training.cuda_process_sharing=no"])


def test_later_override_wins_and_interpolation_resolves() -> None:
    cfg = load_config(ALGO, TASK, "mujoco", ["algo.batch_size=64", "algo.batch_size=32", "algo.critic_lr=${algo.actor_lr}"])
    assert cfg.algo.batch_size == 32 and cfg.algo.critic_lr == cfg.algo.actor_lr


def test_layering_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """schema < algo YAML < task YAML `algo` < task YAML `algo_by_name.<algo>` < overrides."""
    algo_file = tmp_path / "a.yaml"
    task_file = tmp_path / "t.yaml"
    algo_file.write_text(yaml.safe_dump({
        "training": {"num_envs": 100, "seed": 5},
        "algo": {"batch_size": 100, "tau": 0.1, "gamma": 0.9, "num_atoms": 11},
    }))
    task_file.write_text(yaml.safe_dump({
        "training": {"num_envs": 200},
        "algo": {"batch_size": 200, "tau": 0.2},
        "algo_by_name": {"sac": {"tau": 0.3}, "flashsac": {"gamma": 0.5}},
    }))
    monkeypatch.setattr(load_mod, "algo_yaml", lambda name: algo_file)
    cfg = load_mod.load_config(ALGO, _with_yaml(task_file), "mujoco", ["algo.num_atoms=21"])
    assert cfg.algo.policy_frequency == Config().algo.policy_frequency  # schema
    assert cfg.training.seed == 5 and cfg.algo.gamma == 0.9  # algo YAML (flashsac entry not applied)
    assert cfg.training.num_envs == 200 and cfg.algo.batch_size == 200  # task YAML beats algo YAML
    assert cfg.algo.tau == 0.3  # algo_by_name beats the task's generic algo section
    assert cfg.algo.num_atoms == 21  # override beats everything


def test_a_task_without_a_yaml_is_fine() -> None:
    cfg = load_mod.load_config(ALGO, TaskFacts(TASK, PendulumConfig), "mujoco", ["training.num_envs=8", "algo.batch_size=32"])
    assert cfg.algo.gamma == 0.97  # sac.yaml alone


SHIPPED = sorted(DEFAULTS_DIR.glob("algo/*.yaml")) + [defaults_of(name) for name in sorted(BUILTIN)]


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_shipped_yaml_matches_the_schema(path: Path) -> None:
    # an algo YAML with a base: is read on top of the file it names; a task's with its keys
    data = load_mod.read_algo_yaml(path.stem) if path.parent.name == "algo" else yaml.safe_load(path.read_text())
    by_name = data.pop("algo_by_name", {}) or {}
    keys = source_of(path.stem).keys if path.parent.name != "algo" else PendulumConfig
    merged = OmegaConf.merge(OmegaConf.structured(Config(task=keys())), data)
    for section in by_name.values():
        OmegaConf.merge(merged, {"algo": section})
    if path.parent.name == "algo":
        assert data["algo"]["name"] == path.stem


def test_placeholder_algo_yaml_settings(tmp_path: Path) -> None:
    for name in ("flashsac", "warpsac"):
        data = load_mod.read_algo_yaml(name)
        assert data["training"]["num_envs"] == 1024
        assert (data["algo"]["batch_size"], data["algo"]["updates_per_step"], data["algo"]["policy_frequency"]) == (2048, 2, 2)


def test_warpsac_yaml_holds_only_what_differs_from_flashsac() -> None:
    """warpsac.yaml amends flashsac.yaml (base: flashsac): every flashsac setting is inherited, and the file
    itself sets nothing flashsac.yaml already sets to the same value."""
    own = yaml.safe_load((DEFAULTS_DIR / "algo" / "warpsac.yaml").read_text())
    flash = load_mod.read_algo_yaml("flashsac")
    assert own.pop("base") == "flashsac"
    repeated = [f"{section}.{k}" for section, keys in own.items() for k, v in keys.items()
                if flash.get(section, {}).get(k) == v]
    assert not repeated, f"warpsac.yaml repeats flashsac.yaml: {repeated}"
    warp = load_mod.read_algo_yaml("warpsac")
    assert {k: v for k, v in warp["algo"].items() if k in flash["algo"] and k != "name"} == \
        {k: v for k, v in flash["algo"].items() if k != "name"}
    assert (warp["algo"]["name"], warp["algo"]["decay_step"]) == ("warpsac", 512)


def test_an_algo_base_must_name_another_algorithm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "sac.yaml").write_text("base: sac\nalgo: {name: sac}\n")
    monkeypatch.setattr(load_mod, "algo_yaml", lambda name: tmp_path / f"{name}.yaml")
    e = _error([])
    assert e.key == "base" and "another algorithm" in str(e)


# --- sim / algo / task names -----------------------------------------------------------------------


def test_sim_none_picks_best_backend() -> None:
    assert load_config(ALGO, TASK, None, []).sim.name == "mujoco"  # conftest: no CUDA


def test_sim_override_without_flag_is_accepted() -> None:
    assert load_config(ALGO, TASK, None, ["sim.name=mjwarp"]).sim.name == "mjwarp"


@pytest.mark.parametrize(("override", "key", "flag"), [
    ("sim.name=mjwarp", "sim.name", "--sim"),
    ("algo.name=flashsac", "algo.name", "--algo"),
    ("task.name=g1_walk_flat", "task.name", "--task"),
])
def test_names_are_chosen_by_flags(override: str, key: str, flag: str) -> None:
    e = _error([override])
    assert e.key == key and flag in e.fix


def test_name_override_equal_to_flag_is_harmless() -> None:
    cfg = load_config(ALGO, TASK, "mujoco", ["algo.name=sac", "task.name=pendulum_swingup", "sim.name=mujoco"])
    assert cfg.algo.name == "sac"


# --- wrapped OmegaConf / parse errors ------------------------------------------------------------


def test_unknown_key_lists_close_matches() -> None:
    e = _error(["training.num_env=5"])
    assert e.key == "training.num_env" and "unknown key" in str(e)
    assert "training.num_envs" in e.allowed
    assert e.fix == "use training.num_envs=5 (every key: `duorl config --keys`)"
    e = _error(["num_envs=5"])  # section forgotten
    assert "training.num_envs" in e.allowed
    e = _error(["algo.bach_size=5"])
    assert "algo.batch_size" in e.allowed
    e = _error(["zzz=1"])
    assert e.key == "zzz" and "`duorl config --keys`" in e.fix and "schema.py" not in str(e)
    e = _error(["training.x=1"])  # the shared section prefix alone is no match
    assert "training.seed" not in e.allowed
    e = _error(["algo.algo_param.whole_cycle_cuda_graph=false"])  # section typo
    assert "algo.algo_params.whole_cycle_cuda_graph" in e.allowed


@pytest.mark.parametrize(("override", "key", "expected"), [
    ("algo.batch_size=abc", "algo.batch_size", "int"),
    ("algo.batch_size=1.5", "algo.batch_size", "int"),
    ("algo.gamma=high", "algo.gamma", "float"),
    ("training.devices=0", "training.devices", "[cpu]"),
    ("algo.actor_hidden_dims=[a]", "algo.actor_hidden_dims", "list[int]"),
    ("training.no_play=maybe", "training.no_play", "bool"),
    ("task.max_episode_steps=x", "task.max_episode_steps", "int or null"),
])
def test_wrong_type_names_expected_type(override: str, key: str, expected: str) -> None:
    e = _error([override])
    assert e.key == key and "wrong type" in str(e) and expected in e.allowed
    assert f"{key}=" in e.fix  # with an example


def test_error_quotes_the_value_as_typed() -> None:
    assert str(_error(["algo.batch_size=abc"])).startswith("algo.batch_size=abc: ")
    assert str(_error(["algo.actor_hidden_dims=[a]"])).startswith("algo.actor_hidden_dims=[a]: ")


@pytest.mark.parametrize("item", ["foo", "=3", "algo.batch_size"])
def test_malformed_override(item: str) -> None:
    e = _error([item])
    assert "malformed override" in str(e) and "key=value" in e.allowed and "=<value>" in e.fix


def test_list_element_override_is_refused() -> None:
    e = _error(["algo.actor_hidden_dims[0]=5"])
    assert "one list element" in str(e) and "algo.actor_hidden_dims=[256,256]" in e.fix


def test_list_and_mapping_mismatch() -> None:
    e = _error(["algo.actor_hidden_dims={a: 1}"])
    assert e.key == "algo.actor_hidden_dims"


def test_names_cannot_reach_other_files() -> None:
    assert _error([], task="../algo/sac").key == "task.name"
    assert _error([], algo="../task/pendulum_swingup").key == "algo.name"


def test_algo_by_name_typo_in_task_yaml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = tmp_path / "t.yaml"
    bad.write_text("algo_by_name:\n  sack: {tau: 0.1}\n")
    e = _error([], task=_with_yaml(bad))
    assert e.key == "algo_by_name" and "sack" in str(e) and str(bad) in str(e)


def test_section_assigned_a_value() -> None:
    e = _error(["training.nan_guard=3"])
    assert e.key == "training.nan_guard" and "section" in str(e)
    assert "training.nan_guard.enabled=" in e.fix


def test_unparsable_value_and_bad_interpolation() -> None:
    e = _error(["algo.actor_hidden_dims=[1,"])
    assert e.key == "algo.actor_hidden_dims" and "cannot parse" in str(e)
    e = _error(["algo.gamma=${nope}"])
    assert e.key == "algo.gamma" and "interpolation" in str(e)


def test_bad_yaml_file_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("algo:\n  batchsize: 5\n")
    e = _error([], task=_with_yaml(bad))
    assert e.key == "algo.batchsize" and str(bad) in str(e) and "algo.batch_size" in e.allowed
    bad.write_text("algo: [1, 2\n")
    e = _error([], task=_with_yaml(bad))
    assert "malformed YAML" in str(e) and str(bad) in str(e)
    bad.write_text("algo:\n  batch_size: many\n")
    assert _error([], task=_with_yaml(bad)).key == "algo.batch_size"


# --- serialisation -------------------------------------------------------------------------------


def test_config_to_dict_is_json_ready() -> None:
    cfg = load_config(ALGO, TASK, "mujoco", ["training.devices=[cpu]"])
    d = config_to_dict(cfg)
    assert json.loads(json.dumps(d)) == d
    assert d["training"]["devices"] == ["cpu"] and d["algo"]["algo_params"]["whole_cycle_cuda_graph"] is None


def test_config_hash_is_stable_and_sensitive() -> None:
    a = load_config(ALGO, TASK, "mujoco", [])
    b = load_config(ALGO, TASK, "mujoco", [])
    c = load_config(ALGO, TASK, "mujoco", ["training.seed=2"])
    assert config_hash(a) == config_hash(b) == config_hash(pickle.loads(pickle.dumps(a)))
    assert config_hash(a) != config_hash(c)
    assert len(config_hash(a)) == 16 and int(config_hash(a), 16) >= 0
