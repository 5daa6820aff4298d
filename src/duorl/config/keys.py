"""The schema's keys as dotted paths, each with its type, default and `Setting` (meaning, bounds,
choices, resume rule), for validation, error messages, `duorl config --keys`, docs/configuration.md and
resume.

The `task` section is the run's task's dataclass of keys (`task_keys`: config.schema.TaskConfig, the keys
every task reads, or a task's own extension of it, config/tasks.py); every function here takes it."""

from __future__ import annotations

import dataclasses
import difflib
import functools
import typing
from typing import Any

from duorl.config.schema import MAY_DIFFER, Config, Setting, TaskConfig, setting_of


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Union:
        inner = [a for a in args if a is not type(None)]
        names = " | ".join(_type_name(a) for a in inner)
        return f"{names} or null" if len(inner) < len(args) else names
    if origin is list:
        return f"list[{_type_name(args[0])}]" if args else "list"
    if tp is Any:
        return "any"
    return getattr(tp, "__name__", str(tp))


@functools.cache
def leaves(task_keys: type[TaskConfig] = TaskConfig) -> dict[str, tuple[Any, dataclasses.Field[Any]]]:
    """{"training.num_envs": (its type hint, its dataclass field), ...} for every settable leaf, in schema
    order (the field's Setting: schema.setting_of), the task section's from `task_keys`."""
    out: dict[str, tuple[Any, dataclasses.Field[Any]]] = {}

    def walk(cls: type, prefix: str) -> None:
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            tp = task_keys if (cls is Config and f.name == "task") else hints[f.name]
            if dataclasses.is_dataclass(tp):
                walk(tp, f"{prefix}{f.name}.")
            else:
                out[f"{prefix}{f.name}"] = (tp, f)

    walk(Config, "")
    return out


@functools.cache
def leaf_types(task_keys: type[TaskConfig] = TaskConfig) -> dict[str, str]:
    """{"training.num_envs": "int", ...} for every settable leaf of the schema."""
    return {k: _type_name(tp) for k, (tp, _) in leaves(task_keys).items()}


@functools.cache
def task_keys_of(task_keys: type[TaskConfig]) -> tuple[str, ...]:
    """The dotted keys `task_keys` declares beyond the ones every task reads, in declaration order."""
    generic = {f.name for f in dataclasses.fields(TaskConfig)}
    return tuple(f"task.{f.name}" for f in dataclasses.fields(task_keys) if f.name not in generic)


def default_of(key: str, task_keys: type[TaskConfig] = TaskConfig) -> Any:
    """The schema default at a dotted path (used to build 'e.g.' examples)."""
    node: Any = Config(task=task_keys())
    for part in key.split("."):
        node = getattr(node, part)
    return node


def _ratio(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, a, b).ratio()


def close_matches(key: str, n: int = 3, task_keys: type[TaskConfig] = TaskConfig) -> list[str]:
    """Known dotted keys that look like `key`.

    Matching is on the last component (a shared `training.` prefix says nothing about `x`), with
    the section's likeness as a tie-break, so `num_envs` and `trainin.num_env` both find
    `training.num_envs`. Section names are offered only when no settable key is close.
    """
    section, _, leaf = key.rpartition(".")
    scored = []
    for k in leaf_types(task_keys):
        k_section, _, k_leaf = k.rpartition(".")
        r = _ratio(leaf, k_leaf)
        if r >= 0.75:
            scored.append((r + 0.5 * _ratio(section, k_section), k))
    if scored:
        return [k for _, k in sorted(scored, key=lambda t: -t[0])[:n]]
    sections = sorted({k.rsplit(".", 1)[0] for k in leaf_types(task_keys) if "." in k})
    return difflib.get_close_matches(key, sections, n=n, cutoff=0.75)


@dataclasses.dataclass(frozen=True)
class KeyInfo:
    """One settable key as documented: what `duorl config --keys` and docs/configuration.md show."""

    key: str
    type: str
    default: Any
    help: str | None  # the schema's one-line meaning (None: the key was declared without setting())
    allowed: str
    setting: Setting | None = None


def number_text(v: float) -> str:
    """A bound as a reader writes it: 1, 0.5, 4294967295."""
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


def bounds_text(s: Setting) -> str:
    """A key's bounds as a reader writes them: '>= 1', '> 0', '0 < value <= 1' ('' without bounds)."""
    lower = (">=", s.min) if s.min is not None else (">", s.above) if s.above is not None else None
    upper = ("<=", s.max) if s.max is not None else ("<", s.below) if s.below is not None else None
    if lower and upper:
        flip = {">=": "<=", ">": "<"}[lower[0]]
        return f"{number_text(lower[1])} {flip} value {upper[0]} {number_text(upper[1])}"
    bound = lower or upper
    return f"{bound[0]} {number_text(bound[1])}" if bound else ""


def _allowed(s: Setting | None, type_name: str) -> str:
    """What a key accepts, from its Setting: the schema's own text, its choices, its bounds, or its type."""
    optional = "or null" in type_name
    if s is not None and s.allowed is not None:
        return s.allowed() if callable(s.allowed) else s.allowed
    if s is not None and s.choices:
        return ("null, " if optional else "") + ", ".join(s.choices)
    if s is not None and s.bounded:
        text = bounds_text(s)
        if type_name.startswith("list["):
            return f"non-empty list of ints {text}"
        return f"null or {text}" if optional else text
    if type_name == "bool":
        return "true, false"
    if type_name == "bool or null":
        return "null, true, false"
    return "any"


@functools.cache
def describe(task_keys: type[TaskConfig] = TaskConfig) -> dict[str, KeyInfo]:
    """Every settable leaf with its type, default, one-line meaning and allowed values, in schema order,
    all read from the schema's `setting(...)` declarations (the task section's from `task_keys`)."""
    out: dict[str, KeyInfo] = {}
    for key, (_, f) in leaves(task_keys).items():
        type_name = leaf_types(task_keys)[key]
        s = setting_of(f)
        out[key] = KeyInfo(key, type_name, default_of(key, task_keys), s.help if s else None, _allowed(s, type_name), s)
    return out


def may_differ_on_resume(task_keys: type[TaskConfig] = TaskConfig) -> frozenset[str]:
    """The keys a resumed run may change (Setting.resume): where and how long it runs, how it reports,
    test hooks."""
    return frozenset(k for k, i in describe(task_keys).items()
                     if i.setting is not None and i.setting.resume == MAY_DIFFER)


def data_parallel_only() -> tuple[str, ...]:
    """The keys only a data-parallel run reads (Setting.data_parallel_only)."""
    return tuple(k for k, i in describe().items() if i.setting is not None and i.setting.data_parallel_only)


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested config dict (config_to_dict) as {"section.key": value}."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out
