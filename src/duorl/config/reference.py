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
_PINNED = ("algo.name", "task.name", "sim.name")  # chosen by --algo/--task/--sim, not by YAML


def _value(v: Any) -> str:
    """A value as one YAML flow scalar or list (what a user would write in a YAML file)."""
    text = yaml.safe_dump(v, default_flow_style=True, width=10**6).strip()
    return text.removesuffix("\n...").removesuffix("...").strip()


def keys_text() -> str:
    """`duorl config --keys`: one line per key, `key  type = default  meaning`. The default is what the
    built-in runs start from: the schema's, or the value every shipped YAML sets, or `per task` / `per
    algo` / `per algo and task` with the values after the meaning."""
    infos = list(describe().values())
    shipped = shipped_defaults()
    kw = max(len(i.key) for i in infos)
    shown = {i.key: shipped[i.key][0] if i.key in shipped else format_value(i.default) for i in infos}
    tw = max(len(f"{i.type} = {shown[i.key]}") for i in infos)
    lines = []
    for i in infos:
        detail = f" ({shipped[i.key][1]})" if i.key in shipped and shipped[i.key][1] else ""
        lines.append(f"{i.key.ljust(kw)}  {f'{i.type} = {shown[i.key]}'.ljust(tw)}  {i.help or '(no help yet)'}{detail}")
    return "\n".join(lines) + "\n"


def _grouped(values: dict[str, str], names: str = ", ", groups: str = "; ", sep: str = " ") -> str:
    """{'a': '1', 'b': '2', 'c': '1'} -> 'a, c 1; b 2' (names sharing a value together, first seen first)."""
    by_value: dict[str, list[str]] = {}
    for name, v in values.items():
        by_value.setdefault(v, []).append(name)
    return groups.join(f"{names.join(n)}{sep}{v}" for v, n in by_value.items())


def shipped_defaults() -> dict[str, tuple[str, str]]:
    """Per key whose built-in runs (every algorithm with every task YAML, before overrides) do not all
    start from the schema default: (what `--keys` shows as its default, the values per run or '')."""
    from duorl.config.load import shipped_values  # load imports OmegaConf

    tasks = yaml_task_names()
    runs = {(a, t): shipped_values(a, t) for a in ALGOS for t in tasks}
    out: dict[str, tuple[str, str]] = {}
    for key, info in describe().items():
        if key in _PINNED:
            continue
        got = {run: values[key] for run, values in runs.items()}
        if all(v == info.default for v in got.values()):
            continue
        distinct = {format_value(v) for v in got.values()}
        by_task = all(len({format_value(got[(a, t)]) for a in ALGOS}) == 1 for t in tasks)
        by_algo = all(len({format_value(got[(a, t)]) for t in tasks}) == 1 for a in ALGOS)
        shown = {run: format_value(v) for run, v in got.items()}
        if len(distinct) == 1:
            out[key] = (distinct.pop(), "")
        elif by_task:
            out[key] = ("per task", "per task: " + _grouped({t: shown[(ALGOS[0], t)] for t in tasks}))
        elif by_algo:
            out[key] = ("per algo", "per algo: " + _grouped({a: shown[(a, tasks[0])] for a in ALGOS}))
        else:  # per task, its algorithms grouped: 'g1_walk_flat: sac 4096, flashsac/warpsac 1024; ...'
            per_task = {t: _grouped({a: shown[(a, t)] for a in ALGOS}, "/", ", ") for t in tasks}
            per_task = {t: v if len({shown[(a, t)] for a in ALGOS}) > 1 else shown[(ALGOS[0], t)]
                        for t, v in per_task.items()}
            out[key] = ("per algo and task", "per algo and task: " + _grouped(per_task, sep=": "))
    return out


def resolved_listing(algo: str, task: str, sim: str | None, overrides: list[str]) -> str:
    """`duorl config`: the command, the sources it used, then the resolved YAML. Raises ConfigError."""
    from duorl.config.load import SOURCES, algo_base, config_to_dict, resolve_config

    from duorl.config.switches import data_parallel_enabled
    from duorl.config.validate import check_data_parallel_keys

    cfg, sources = resolve_config(algo, task, sim, overrides)
    check_data_parallel_keys(cfg, data_parallel_enabled(cfg, launched_rank=False))  # as `duorl train` does
    command = " ".join(["duorl config --algo", algo, "--task", task, *(["--sim", sim] if sim else []), *overrides])
    base = algo_base(algo)
    legend = [f"  {s}: {SOURCES[s].replace('ALGO', algo).replace('TASK', task)}"
              + (f" (on its base: defaults/algo/{base}.yaml)" if s == "algo" and base else "")
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
    from duorl.config.load import layer_keys, read_algo_yaml  # load imports OmegaConf

    # key -> {(file group, value): [qualifiers]}, in first-seen order
    found: dict[str, dict[tuple[str, str], list[str]]] = {}

    def add(data: dict[str, Any], group: str, qualifier: str) -> None:
        for key in layer_keys(data):
            node: Any = data
            for part in key.split("."):
                node = node[part]
            found.setdefault(key, {}).setdefault((group, _value(node)), []).append(qualifier)

    for algo in ALGOS:
        add(read_algo_yaml(algo), "", f"{algo}.yaml")  # with its base: (warpsac.yaml: flashsac.yaml's settings)
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
    resume = info.setting.resume if info.setting else ""
    cells = [f"`{info.key}`", info.type, f"`{format_value(info.default)}`", info.allowed,
             "; ".join(shipped), resume, info.help or ""]
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


def markdown() -> str:
    """docs/configuration.md."""
    shipped = _yaml_settings()
    for pinned in _PINNED:
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
        "with one line naming the key, the value and the fix (exit code 2). *On resume*: whether a run resumed",
        "with `training.resume` may change the key (`may differ`) or must keep the checkpoint's value (`must match`).",
        "The `data parallel:` keys are read only by data-parallel runs; a one-device run refuses them unless",
        "they keep their defaults.",
        "",
    ]
    section = None
    for key, info in infos.items():
        top = key.split(".", 1)[0]
        if top != section:
            section = top
            out += [f"## `{top}`", "", "| key | type | default | allowed | shipped YAMLs | on resume | meaning |",
                    "|---|---|---|---|---|---|---|"]
        out.append(_row(info, shipped.get(key, [])))
        nxt = list(infos)[list(infos).index(key) + 1:] or [None]
        if nxt[0] is None or nxt[0].split(".", 1)[0] != top:
            out.append("")
    return "\n".join(out)
