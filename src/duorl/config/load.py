"""Compose a Config: schema defaults < algo YAML < task YAML < `key=value` overrides, then validate.

The task comes resolved (config/tasks.TaskFacts, from the entry layer): its dataclass of keys makes the
`task` section, its YAML layer (a builtin task's) sits above the algorithm's. Task YAML files may carry,
besides ordinary sections (training, algo, sim, ...), an `algo_by_name` section whose entry for the
chosen algorithm is applied after the task's generic `algo` section.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigKeyError, InterpolationResolutionError, OmegaConfBaseException

import duorl.config.devices as devices
from duorl.config.catalog import algo_yaml
from duorl.config.errors import NO_VALUE, ConfigError, ConfigErrors, format_value
from duorl.config.extras import check_extras
from duorl.config.keys import close_matches, default_of, describe, flatten, leaf_types
from duorl.config.schema import ALGOS, Config, TaskConfig, setting_of
from duorl.config.tasks import TaskFacts
from duorl.config.validate import validate

__all__ = ["load_config", "resolve_config", "config_to_dict", "config_hash", "best_sim"]

# Algo names become file names: keep them plain so `--algo ../x` cannot reach other files (a task's YAML
# is the task layer's own path, config/tasks.TaskFacts.defaults).
_NAME = re.compile(r"[A-Za-z0-9_\-]+")


def best_sim() -> str:
    """mjwarp when a CUDA device is visible, else MuJoCo's CPU backend."""
    return "mjwarp" if devices.cuda_device_count() > 0 else "mujoco"


def _sections(task_keys: type[TaskConfig]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for k in leaf_types(task_keys):
        parts = k.split(".")
        for i in range(1, len(parts)):
            out.setdefault(".".join(parts[:i]), []).append(k)
    return out


def _wrap(e: Exception, key: str | None, value: Any, source: str, task: TaskFacts) -> ConfigError:
    """Turn an OmegaConf error into a ConfigError naming the dotted key.

    `key`/`value` are the override being merged (None/NO_VALUE for a YAML layer or the final
    resolution, where OmegaConf's own full_key and value are the best we have). `task`: the run's task,
    whose keys make the `task` section (a key it does not declare is refused naming it).
    """
    keys = task.keys
    reported = getattr(e, "full_key", None)
    # an override `training={x: 1}` fails deeper (training.x): name the deeper key
    deeper = bool(key and reported and reported.startswith(key + "."))
    full_key = reported if deeper else key or reported or "?"
    if deeper:
        value = NO_VALUE  # the value typed belongs to the outer key
    base = full_key.split("[", 1)[0]  # algo.actor_hidden_dims[0] -> algo.actor_hidden_dims
    if value is NO_VALUE and key is None and getattr(e, "full_key", None) and getattr(e, "value", None) is not None:
        value = e.value
    where = f" (in {source})" if source else ""
    text = (getattr(e, "msg", None) or str(e)).strip()
    first_line = text.splitlines()[0].rstrip(".") if text else type(e).__name__
    if isinstance(e, InterpolationResolutionError):
        return ConfigError(full_key, value, f"cannot resolve an interpolation{where}: {first_line}",
                           "${section.key} references to existing keys", "fix the ${...} reference or write the value")
    if base in _sections(keys):
        section = _sections(keys)[base]
        eg = next((k for k in section if default_of(k, keys) is not None), section[0])
        return ConfigError(full_key, value, f"{base} is a section, not a value{where}", ", ".join(section),
                           f"set one of its keys, e.g. {eg}={format_value(default_of(eg, keys))}")
    if isinstance(e, ConfigKeyError) and base.startswith("task.") and base not in leaf_types(keys):
        return _not_a_task_key(base, full_key, value, where, task)
    if isinstance(e, ConfigKeyError) and base not in leaf_types(keys):
        matches = close_matches(base, task_keys=keys)
        allowed = ("close matches: " + ", ".join(matches)) if matches else "the keys `duorl config --keys` lists"
        shown = "" if value is NO_VALUE else f"={format_value(value)}"
        if not matches:
            fix = "check the spelling against `duorl config --keys`"
        elif matches[0] in leaf_types(keys):
            fix = f"use {matches[0]}{shown} (every key: `duorl config --keys`)"
        else:  # a section: name one of its keys
            fix = f"use a key of {matches[0]}, e.g. {_sections(keys)[matches[0]][0]} (every key: `duorl config --keys`)"
        return ConfigError(full_key, value, f"unknown key{where}", allowed, fix)
    expected = leaf_types(keys).get(base)
    if expected is not None:
        info = describe(keys)[base]
        # the schema's example where the default (null) shows nothing useful
        example = info.setting.example if info.setting and info.setting.example is not None else info.default
        eg = f", e.g. {base}={format_value(example)}" if example is not None else ""
        allowed = info.allowed if info.setting and info.setting.allowed else expected
        return ConfigError(full_key, value, f"wrong type{where}: {first_line}", allowed,
                           f"give {base} a value of type {expected}{eg}")
    return ConfigError(full_key, value, f"invalid{where}: {first_line}", "the values `duorl config --keys` lists",
                       "fix or remove this entry")


def _not_a_task_key(base: str, full_key: str, value: Any, where: str, task: TaskFacts) -> ConfigError:
    """A `task.*` key the run's task does not declare: refused naming the task and the keys it has."""
    own = [k for k in leaf_types(task.keys) if k.startswith("task.")]
    matches = [m for m in close_matches(base, task_keys=task.keys) if m.startswith("task.")]
    shown = "" if value is NO_VALUE else f"={format_value(value)}"
    fix = (f"use {matches[0]}{shown}" if matches else "remove the key, or train a task that declares it") + \
        " (each task's keys: `duorl config --keys`)"
    return ConfigError(full_key, value, f"the task {task.name} does not declare {base}{where}",
                       f"its keys: {', '.join(own)}", fix)


def _merge(cfg: DictConfig, layer: Any, source: str, task: TaskFacts, key: str | None = None,
           value: Any = NO_VALUE) -> DictConfig:
    try:
        # unsafe_merge skips deep-copying `cfg` (2x faster); cfg is ours and dropped on error
        return OmegaConf.unsafe_merge(cfg, layer)  # type: ignore[return-value]
    except (OmegaConfBaseException, TypeError) as e:  # TypeError: a mapping merged onto a list, or back
        raise _wrap(e, key, value, source, task) from None


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except UnicodeDecodeError as e:
        raise ConfigError(str(path), NO_VALUE, f"is not UTF-8 text (byte {e.start}: {e.reason})", "a UTF-8 YAML file",
                          "save the file as UTF-8") from None
    except OSError as e:
        raise ConfigError(str(path), NO_VALUE, f"cannot be read ({e.strerror or e})", "a readable YAML file",
                          "check the file's path and permissions") from None
    except yaml.YAMLError as e:
        raise ConfigError(str(path), NO_VALUE, f"malformed YAML: {e}".replace("\n", " "), "YAML mappings",
                          "fix the file") from None
    if not isinstance(data, dict):
        raise ConfigError(str(path), NO_VALUE, "not a YAML mapping", "a mapping of sections", "fix the file")
    return data


def _parse_override(item: str, task_keys: type[TaskConfig]) -> tuple[str, str, DictConfig]:
    key, sep, raw = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(item or "''", NO_VALUE, "malformed override (expected key=value)",
                          "dotted key=value pairs such as algo.batch_size=256",
                          f"write it as {key or 'section.key'}=<value>")
    if "[" in key or "]" in key:
        base = key.split("[", 1)[0]
        raise ConfigError(key, raw, "setting one list element is not supported", f"the whole list: {base}=[...]",
                          f"write the whole list, e.g. {base}=[256,256]")
    try:
        parsed = OmegaConf.from_dotlist([f"{key}={raw}"])
    except (OmegaConfBaseException, yaml.YAMLError) as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ConfigError(key, raw, f"cannot parse the value ({msg})", "YAML scalars or lists such as [0] or [256,256]",
                          "quote or fix the value") from None
    if raw.strip().lower() in ("on", "off", "yes", "no") and leaf_types(task_keys).get(key, "").startswith("str"):
        # YAML reads these words as booleans; for a text key the word is meant (task.penalty_curriculum=off)
        parsed = OmegaConf.create()
        OmegaConf.update(parsed, key, raw.strip(), force_add=True)
    return key, raw, parsed


def _pinned(key: str, chosen: str, value: Any, flag: str) -> None:
    """algo.name and task.name pick the YAML layers, so only the command-line flag may set them."""
    if value != chosen:
        raise ConfigError(key, value, f"{key} is chosen by {flag} (here {chosen!r}), not by an override",
                          f"only {flag}", f"use {flag} {value} and drop the {key} override")


# Where a resolved value came from (`duorl config` prints it beside each value), lowest layer first.
SOURCES = {
    "schema": "config/schema.py",
    "algo": "defaults/algo/ALGO.yaml",
    "task": "TASK_YAML (its algo_by_name entry included)",
    "override": "a key=value argument",
    "--algo": "the --algo flag (default sac)", "--task": "the --task flag (default DEFAULT_TASK)",
    "--sim": "the --sim flag",
    "auto": "picked for this machine (sim.name: mjwarp with a visible GPU or an mjlab task, else mujoco)",
}


def layer_keys(data: Any, prefix: str = "", task_keys: type[TaskConfig] = TaskConfig) -> list[str]:
    """The schema keys a layer (a YAML mapping or a parsed override) sets. A list value is one key;
    a mapping under a settable key is left to the merge to refuse."""
    out: list[str] = []
    if not isinstance(data, dict):
        return out
    for k, v in data.items():
        key = f"{prefix}{k}"
        if key in leaf_types(task_keys) or not isinstance(v, dict):
            out.append(key)
        else:
            out.extend(layer_keys(v, key + ".", task_keys))
    return out


def _deep_merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in top.items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def read_algo_yaml(algo: str, _seen: tuple[str, ...] = ()) -> dict[str, Any]:
    """defaults/algo/ALGO.yaml ({} when absent), with the file its `base:` names merged under it: an
    algorithm that differs from another in a few settings holds only those."""
    path = algo_yaml(algo)
    if not path.is_file():
        return {}
    data = _read_yaml(path)
    base = data.pop("base", None)
    if base is None:
        return data
    if base not in ALGOS or base in (algo, *_seen):
        raise ConfigError("base", base, f"must name another algorithm's YAML, without a cycle (in {path})",
                          ", ".join(a for a in ALGOS if a != algo), "fix the base: line of the algo YAML")
    return _deep_merge(read_algo_yaml(base, (*_seen, algo)), data)


def algo_base(algo: str) -> str | None:
    """The algorithm whose YAML ALGO.yaml amends (its `base:`), if any."""
    path = algo_yaml(algo)
    return _read_yaml(path).get("base") if path.is_file() else None


class _Layers:
    """A config being layered (an OmegaConf DictConfig) and, per dotted key, the layer that set it."""

    def __init__(self, task: TaskFacts) -> None:
        self.task = task
        self.cfg: DictConfig = OmegaConf.structured(Config(task=task.keys()))
        self.sources = dict.fromkeys(leaf_types(task.keys), "schema")

    def merge(self, layer: dict[str, Any] | DictConfig, source: str, where: str, key: str | None = None,
              value: Any = NO_VALUE) -> None:
        self.cfg = _merge(self.cfg, layer if isinstance(layer, DictConfig) else OmegaConf.create(layer), where,
                          self.task, key, value)
        plain = OmegaConf.to_container(layer) if isinstance(layer, DictConfig) else layer
        self.sources.update(dict.fromkeys(layer_keys(plain, task_keys=self.task.keys), source))


def read_task_yaml(task: TaskFacts) -> tuple[dict[str, Any], dict[str, Any]]:
    """The task's YAML layer and its `algo_by_name` section ({}, {} without one)."""
    if task.defaults is None:
        return {}, {}
    path = task.defaults
    data = _read_yaml(path)
    by_name = data.pop("algo_by_name", None) or {}
    if not isinstance(by_name, dict) or not set(by_name) <= set(ALGOS):
        raise ConfigError("algo_by_name", by_name if not isinstance(by_name, dict) else sorted(by_name),
                          f"must map algorithm names to algo settings (in {path})", ", ".join(ALGOS),
                          "fix the algo_by_name section of the task YAML")
    return data, by_name


def _shipped_layers(algo: str, task: TaskFacts) -> _Layers:
    """The schema < defaults/algo/ALGO.yaml < the task's YAML < its algo_by_name entry for ALGO."""
    layers = _Layers(task)
    data = read_algo_yaml(algo)
    if data:
        layers.merge(data, "algo", str(algo_yaml(algo)))

    if task.defaults is not None:  # builtin tasks; others start from the schema's and their keys' defaults
        path = task.defaults
        data, by_name = read_task_yaml(task)
        layers.merge(data, "task", str(path))
        if by_name.get(algo):
            layers.merge({"algo": by_name[algo]}, "task", f"{path} algo_by_name.{algo}")
    return layers


def shipped_values(algo: str, task: TaskFacts) -> dict[str, Any]:
    """Every dotted key's value from the schema and the shipped YAMLs of ALGO and TASK alone: what a run
    gets before any override (not validated; the names stay the schema's)."""
    return flatten(OmegaConf.to_container(_shipped_layers(algo, task).cfg, resolve=True))


def load_config(algo: str, task: TaskFacts, sim: str | None = None, overrides: list[str] | tuple[str, ...] = (),
                probe_devices: bool = True) -> Config:
    """The validated Config for `duorl train --algo ALGO --task TASK [--sim SIM] [key=value ...]`, TASK
    resolved by the entry layer (cli/configure.py) into its facts.

    sim=None picks the best available backend (best_sim) unless an override sets sim.name.
    Returns a plain dataclass instance (picklable, for spawned processes). Raises ConfigError.
    `probe_devices=False`: device entries are checked for their shape only, without a CUDA query (a
    data-parallel rank reads its entry before narrowing CUDA_VISIBLE_DEVICES to it).
    """
    return resolve_config(algo, task, sim, overrides, probe_devices)[0]


def resolve_config(algo: str, task: TaskFacts, sim: str | None = None, overrides: list[str] | tuple[str, ...] = (),
                   probe_devices: bool = True) -> tuple[Config, dict[str, str]]:
    """load_config's Config and, per dotted key, the layer that set its value (a key of SOURCES)."""
    if not _NAME.fullmatch(algo):
        raise ConfigError("algo.name", algo, "unknown algorithm", ", ".join(ALGOS), "pick one with --algo, e.g. --algo sac")
    layers = _shipped_layers(algo, task)
    sources, merge = layers.sources, layers.merge

    layers.cfg.algo.name = algo
    layers.cfg.task.name = task.name
    sources.update({"algo.name": "--algo", "task.name": "--task"})
    if sim is not None:
        layers.cfg.sim.name = sim
        sources["sim.name"] = "--sim"

    sim_overridden = False
    # every bad override is reported, with every bad value of the rest (validate): one refusal names all
    refused: list[ConfigError] = []
    for item in overrides:
        try:
            key, raw, layer = _parse_override(item, task.keys)
            if key in ("algo.name", "task.name", "sim.name"):
                value = OmegaConf.select(layer, key)
                if key == "algo.name":
                    _pinned(key, algo, value, "--algo")
                elif key == "task.name":
                    _pinned(key, task.name, value, "--task")
                else:
                    if sim is not None:
                        _pinned(key, sim, value, "--sim")
                    sim_overridden = True
            # errors quote the value as typed, which is what the user will edit
            merge(layer, "override", "", key=key, value=raw)
        except ConfigError as e:
            refused.append(e)

    cfg = layers.cfg
    if sim is None and not sim_overridden:
        cfg.sim.name = task.sim or best_sim()  # a task that steps one backend only gets it
        sources["sim.name"] = "auto"

    try:
        obj = OmegaConf.to_object(cfg)
    except OmegaConfBaseException as e:  # unresolvable interpolation, missing value
        raise _wrap(e, None, NO_VALUE, "", task) from None
    assert isinstance(obj, Config)
    expand_paths(obj)
    known = lambda e: e.key in {r.key for r in refused}  # noqa: E731 - one problem per key
    try:
        validate(obj, task, probe_devices=probe_devices)
    except ConfigErrors as e:
        refused.extend(x for x in e.errors if not known(x))
    except ConfigError as e:
        if not known(e):
            refused.append(e)
    if not refused:
        check_extras(obj)  # an optional package's settings, once the rest is right
    if len(refused) == 1:
        raise refused[0]
    if refused:
        raise ConfigErrors(refused)
    return obj, sources


def expand_paths(obj: Any) -> None:
    """Every path key (Setting.path) with a leading `~` becomes the user's home folder, in place, in every
    section and a task's own keys: `training.log_dir=~/runs/a` names $HOME/runs/a, not ./~/runs/a."""
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            expand_paths(value)
        elif isinstance(value, str) and value.startswith("~"):
            s = setting_of(f)
            if s is not None and s.path:
                setattr(obj, f.name, os.path.expanduser(value))


def config_to_dict(cfg: Config) -> dict[str, Any]:
    """The resolved config as plain JSON-ready data (run_config.json)."""
    return dataclasses.asdict(cfg)


def config_hash(cfg: Config) -> str:
    """A stable 16-hex-digit digest of every key (same config -> same hash, across processes)."""
    blob = json.dumps(config_to_dict(cfg), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def config_from_dict(data: dict[str, Any], task: TaskFacts) -> Config:
    """A Config from run_config.json data of a run of `task` (checked against the schema and the task's
    keys; not re-validated, so a run's own config loads even where today's checks would refuse it, e.g.
    a resume path now gone). Task keys the task no longer declares are dropped: a run written before
    each task declared its own keys held every task's."""
    own = {k.split(".", 1)[1] for k in leaf_types(task.keys) if k.startswith("task.")}
    if isinstance(data.get("task"), dict):
        data = {**data, "task": {k: v for k, v in data["task"].items() if k in own}}
    try:
        merged = OmegaConf.merge(OmegaConf.structured(Config(task=task.keys())), data)
        obj = OmegaConf.to_object(merged)
    except Exception as e:  # noqa: BLE001 - surface any schema error the same way as for overrides
        raise _wrap(e, None, NO_VALUE, "run_config.json", task) from None
    assert isinstance(obj, Config)
    return obj
