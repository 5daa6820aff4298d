"""What the schema says, written for people: `duorl config --keys`, `duorl config` (the resolved values
with their sources) and docs/configuration.md, all from config.keys.describe (the schema's help texts).

docs/configuration.md is generated, never edited by hand: `duorl config --reference > docs/configuration.md`
(tests/config/test_reference.py fails, naming that command, when the page and the schema differ).
"""

from __future__ import annotations

from typing import Any

import yaml

from duorl.config.catalog import DEFAULTS_DIR, yaml_task_names
from duorl.config.errors import format_value
from duorl.config.keys import KeyInfo, describe
from duorl.config.schema import ALGOS

REGENERATE = "duorl config --reference > docs/configuration.md"


def _value(v: Any) -> str:
    """A value as one YAML flow scalar or list (what a user would write in a YAML file)."""
    text = yaml.safe_dump(v, default_flow_style=True, width=10**6).strip()
    return text.removesuffix("\n...").removesuffix("...").strip()


def keys_text() -> str:
    """`duorl config --keys`: one line per key, `key  type = default  meaning`."""
    infos = list(describe().values())
    kw = max(len(i.key) for i in infos)
    tw = max(len(f"{i.type} = {format_value(i.default)}") for i in infos)
    lines = [f"{i.key.ljust(kw)}  {f'{i.type} = {format_value(i.default)}'.ljust(tw)}  {i.help or '(no help yet)'}"
             for i in infos]
    return "\n".join(lines) + "\n"


def resolved_listing(algo: str, task: str, sim: str | None, overrides: list[str]) -> str:
    """`duorl config`: the command, the sources it used, then the resolved YAML. Raises ConfigError."""
    from duorl.config.load import SOURCES, config_to_dict, resolve_config

    cfg, sources = resolve_config(algo, task, sim, overrides)
    command = " ".join(["duorl config --algo", algo, "--task", task, *(["--sim", sim] if sim else []), *overrides])
    legend = [f"  {s}: {SOURCES[s].replace('ALGO', algo).replace('TASK', task)}"
              for s in SOURCES if s in set(sources.values())]
    return resolved_yaml(config_to_dict(cfg), sources, "\n".join([command, "value sources:", *legend]))


def resolved_yaml(values: dict[str, Any], sources: dict[str, str], header: str) -> str:
    """The resolved config (config_to_dict) as YAML, each leaf followed by `# <source>`. Parses back to
    `values` with yaml.safe_load."""
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    width = 0
    body: list[tuple[str, str]] = []

    def walk(node: dict[str, Any], prefix: str, indent: int) -> None:
        nonlocal width
        for k, v in node.items():
            key = f"{prefix}{k}"
            if isinstance(v, dict):
                body.append((f"{'  ' * indent}{k}:", ""))
                walk(v, key + ".", indent + 1)
            else:
                text = f"{'  ' * indent}{k}: {_value(v)}"
                width = max(width, len(text))
                body.append((text, sources.get(key, "?")))

    walk(values, "", 0)
    lines += [f"{text.ljust(width)}  # {src}" if src else text for text, src in body]
    return "\n".join(lines) + "\n"


def _yaml_settings() -> dict[str, list[str]]:
    """Per key, what the shipped YAML files set it to, equal values grouped:
    ['sac.yaml: 8192', 'flashsac.yaml, warpsac.yaml: 2048', 'g1_walk_flat (sac, flashsac): 50000', ...]."""
    from duorl.config.load import layer_keys  # load imports this package's heavier parts (OmegaConf)

    # key -> {(file group, value): [qualifiers]}, in first-seen order
    found: dict[str, dict[tuple[str, str], list[str]]] = {}

    def add(data: dict[str, Any], group: str, qualifier: str) -> None:
        for key in layer_keys(data):
            node: Any = data
            for part in key.split("."):
                node = node[part]
            found.setdefault(key, {}).setdefault((group, _value(node)), []).append(qualifier)

    for algo in ALGOS:
        add(yaml.safe_load((DEFAULTS_DIR / "algo" / f"{algo}.yaml").read_text(encoding="utf-8")) or {}, "", f"{algo}.yaml")
    for task in yaml_task_names():
        data = yaml.safe_load((DEFAULTS_DIR / "task" / f"{task}.yaml").read_text(encoding="utf-8")) or {}
        by_name = data.pop("algo_by_name", None) or {}
        add(data, task, "")
        for algo, section in by_name.items():
            add({"algo": section}, task, algo)
    out: dict[str, list[str]] = {}
    for key, groups in found.items():
        for (group, value), quals in groups.items():
            if not group:  # algo YAMLs: the files themselves
                label = ", ".join(quals)
            elif quals == [""]:
                label = group
            else:
                label = f"{group} ({', '.join(q or 'any algo' for q in quals)})"
            out.setdefault(key, []).append(f"{label}: {value}")
    return out


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _row(info: KeyInfo, shipped: list[str]) -> str:
    cells = [f"`{info.key}`", info.type, f"`{format_value(info.default)}`", info.allowed,
             "; ".join(shipped), info.help or ""]
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


def markdown() -> str:
    """docs/configuration.md."""
    shipped = _yaml_settings()
    for pinned in ("algo.name", "task.name", "sim.name"):  # chosen by --algo/--task/--sim, not by YAML
        shipped.pop(pinned, None)
    infos = describe()
    out = [
        "# Configuration reference",
        "",
        f"<!-- Generated from src/duorl/config/schema.py: do not edit. Regenerate with `{REGENERATE}`. -->",
        "",
        "Every key `duorl train` accepts as a trailing `key=value` override. Values are layered: the schema",
        "default < `defaults/algo/ALGO.yaml` < `defaults/task/TASK.yaml` (and its `algo_by_name` entry for the",
        "chosen algorithm) < your overrides. The *shipped YAMLs* column says which of those files change a",
        "default; `duorl config --algo A --task T [key=value ...]` prints every resolved value with its source.",
        "An unknown key, a wrong type or a value outside *allowed* stops the command before anything is built,",
        "with one line naming the key, the value and the fix (exit code 2).",
        "",
    ]
    section = None
    for key, info in infos.items():
        top = key.split(".", 1)[0]
        if top != section:
            section = top
            out += [f"## `{top}`", "", "| key | type | default | allowed | shipped YAMLs | meaning |",
                    "|---|---|---|---|---|---|"]
        out.append(_row(info, shipped.get(key, [])))
        nxt = list(infos)[list(infos).index(key) + 1:] or [None]
        if nxt[0] is None or nxt[0].split(".", 1)[0] != top:
            out.append("")
    return "\n".join(out)
