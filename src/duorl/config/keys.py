"""The schema's keys as dotted paths, for error messages (close matches, expected types)."""

from __future__ import annotations

import dataclasses
import difflib
import functools
import typing
from typing import Any

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
def leaf_types() -> dict[str, str]:
    """{"training.num_envs": "int", ...} for every settable leaf of the schema."""
    out: dict[str, str] = {}

    def walk(cls: type, prefix: str) -> None:
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            tp = hints[f.name]
            if dataclasses.is_dataclass(tp):
                walk(tp, f"{prefix}{f.name}.")
            else:
                out[f"{prefix}{f.name}"] = _type_name(tp)

    walk(Config, "")
    return out


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


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested config dict (config_to_dict) as {"section.key": value}."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out
