"""The schema's keys as dotted paths: types, defaults, meanings and allowed values (for error messages,
`duorl config --keys` and docs/configuration.md)."""

from __future__ import annotations

import dataclasses
import difflib
import functools
import typing
from typing import Any, Callable

import duorl.config.devices as devices
from duorl.config.schema import Config


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
def _leaves() -> dict[str, tuple[Any, dataclasses.Field[Any]]]:
    """{"training.num_envs": (its type hint, its dataclass field), ...} for every settable leaf."""
    out: dict[str, tuple[Any, dataclasses.Field[Any]]] = {}

    def walk(cls: type, prefix: str) -> None:
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            tp = hints[f.name]
            if dataclasses.is_dataclass(tp):
                walk(tp, f"{prefix}{f.name}.")
            else:
                out[f"{prefix}{f.name}"] = (tp, f)

    walk(Config, "")
    return out


@functools.cache
def leaf_types() -> dict[str, str]:
    """{"training.num_envs": "int", ...} for every settable leaf of the schema."""
    return {k: _type_name(tp) for k, (tp, _) in _leaves().items()}


def default_of(key: str) -> Any:
    """The schema default at a dotted path (used to build 'e.g.' examples)."""
    node: Any = Config()
    for part in key.split("."):
        node = getattr(node, part)
    return node


def _ratio(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, a, b).ratio()


def close_matches(key: str, n: int = 3) -> list[str]:
    """Known dotted keys that look like `key`.

    Matching is on the last component (a shared `training.` prefix says nothing about `x`), with
    the section's likeness as a tie-break, so `num_envs` and `trainin.num_env` both find
    `training.num_envs`. Section names are offered only when no settable key is close.
    """
    section, _, leaf = key.rpartition(".")
    scored = []
    for k in leaf_types():
        k_section, _, k_leaf = k.rpartition(".")
        r = _ratio(leaf, k_leaf)
        if r >= 0.75:
            scored.append((r + 0.5 * _ratio(section, k_section), k))
    if scored:
        return [k for _, k in sorted(scored, key=lambda t: -t[0])[:n]]
    sections = sorted({k.rsplit(".", 1)[0] for k in leaf_types() if "." in k})
    return difflib.get_close_matches(key, sections, n=n, cutoff=0.75)


@dataclasses.dataclass(frozen=True)
class KeyInfo:
    """One settable key as documented: what `duorl config --keys` and docs/configuration.md show."""

    key: str
    type: str
    default: Any
    help: str | None  # the schema's one-line meaning (None: the key was declared without setting())
    allowed: str


def _allowed_from_validator(key: str, type_name: str) -> str:
    """What config.validate accepts for `key`, read from its range tables so the two cannot drift."""
    from duorl.config import validate as v

    ints = dict(v._INT_MIN)  # noqa: SLF001 - the validator's own tables
    floats = {k: (lo, inclusive) for k, lo, inclusive in v._FLOAT_MIN}  # noqa: SLF001
    if key in ints:
        return f">= {ints[key]}"
    if key in floats:
        lo, inclusive = floats[key]
        return f"{'>=' if inclusive else '>'} {lo:g}"
    if type_name == "bool":
        return "true, false"
    if type_name == "bool or null":
        return "null, true, false"
    return "any"


def _task_names_allowed() -> str:
    from duorl.envs.task_sources import ALLOWED  # light: no torch, no simulator

    return ALLOWED


# Keys whose allowed values are defined by the module that checks them (it imports the schema, so the
# schema cannot name them). task.name: the task sources (envs/task_sources.py).
_ALLOWED_ELSEWHERE: dict[str, Callable[[], str]] = {
    "training.devices": lambda: devices.ALLOWED,
    "task.name": _task_names_allowed,
}


@functools.cache
def describe() -> dict[str, KeyInfo]:
    """Every settable leaf with its type, default, one-line meaning and allowed values, in schema order.

    Allowed values: the key's `allowed` in the schema (choices or a short text) where it has one, else
    the validator's range for it, else what its type admits."""
    out: dict[str, KeyInfo] = {}
    for key, (_, f) in _leaves().items():
        type_name = leaf_types()[key]
        allowed = f.metadata.get("allowed")
        if isinstance(allowed, tuple):
            allowed = ("null, " if "or null" in type_name else "") + ", ".join(allowed)
        if key in _ALLOWED_ELSEWHERE:
            allowed = _ALLOWED_ELSEWHERE[key]()
        out[key] = KeyInfo(key, type_name, default_of(key), f.metadata.get("help"),
                           allowed or _allowed_from_validator(key, type_name))
    return out


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested config dict (config_to_dict) as {"section.key": value}."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out
