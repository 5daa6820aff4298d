"""What the schema says, written for people: `duorl config --keys`, `duorl config` (the resolved values
with their sources) and docs/configuration.md, all from config.keys.describe (the schema's help texts).

docs/configuration.md is generated, never edited by hand: `duorl config --reference > docs/configuration.md`
(tests/config/test_reference.py fails, naming that command, when the page and the schema differ).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import yaml

from duorl.config.errors import format_value
from duorl.config.keys import KeyInfo, describe, task_keys_of
from duorl.config.schema import ALGOS, TaskConfig
from duorl.config.tasks import TaskCatalog, TaskFacts

REGENERATE = "duorl config --reference > docs/configuration.md"
_PINNED = ("algo.name", "task.name", "sim.name")  # chosen by --algo/--task/--sim, not by YAML
_TASK_KEYS_NOTE = ("A task declares its own `task.*` keys besides `task.name` and `task.max_episode_steps`; "
                   "a key the run's task does not declare is refused, naming the task.")


def _value(v: Any) -> str:
    """A value as one YAML flow scalar or list (what a user would write in a YAML file)."""
    text = yaml.safe_dump(v, default_flow_style=True, width=10**6).strip()
    return text.removesuffix("\n...").removesuffix("...").strip()


def _generic(catalog: TaskCatalog) -> dict[str, KeyInfo]:
    """The keys every run has (the task section: the keys every task reads), task.name's allowed values
    and default from the catalog (the task layer's words)."""
    infos = dict(describe())
    infos["task.name"] = replace(infos["task.name"], allowed=catalog.allowed, default=catalog.default)
    return infos


def _own(task: TaskFacts) -> dict[str, KeyInfo]:
    """The keys `task` declares beyond the ones every task reads."""
    infos = describe(task.keys)
    return {k: infos[k] for k in task_keys_of(task.keys)}


def keys_text(catalog: TaskCatalog) -> str:
    """`duorl config --keys`: one line per key, `key  type = default  meaning`, then each listed task's own
    keys under its name. The default is what the built-in runs start from: the schema's, or the value
    every shipped YAML sets, or `per task` / `per algo` / `per algo and task` with the values after the
    meaning."""
    generic = list(_generic(catalog).values())
    own = {t.name: list(_own(t).values()) for t in catalog.tasks}
    shipped = shipped_defaults(catalog)
    every = generic + [i for infos in own.values() for i in infos]
    kw = max(len(i.key) for i in every) + 2  # task keys are indented under their task

    def shown(i: KeyInfo, task: str | None) -> tuple[str, str]:
        got = shipped.get((task, i.key))
        return (got[0], f" ({got[1]})" if got[1] else "") if got else (format_value(i.default), "")

    rows = [(i, None) for i in generic] + [(i, t) for t, infos in own.items() for i in infos]
    tw = max(len(f"{i.type} = {shown(i, t)[0]}") for i, t in rows)

    def line(i: KeyInfo, task: str | None) -> str:
        default, detail = shown(i, task)
        key = i.key if task is None else f"  {i.key}"
        return f"{key.ljust(kw)}  {f'{i.type} = {default}'.ljust(tw)}  {i.help or '(no help yet)'}{detail}"

    lines = [line(i, None) for i in generic]
    lines += ["", f"# each task's own keys: {_TASK_KEYS_NOTE}"]
    for task in catalog.tasks:
        infos = own[task.name]
        lines.append(f"{task.name}:" if infos else f"{task.name}: none of its own")
        lines += [line(i, task.name) for i in infos]
    lines += [f"# {note}" for note in catalog.notes]
    return "\n".join(lines) + "\n"


def _grouped(values: dict[str, str], names: str = ", ", groups: str = "; ", sep: str = " ") -> str:
    """{'a': '1', 'b': '2', 'c': '1'} -> 'a, c 1; b 2' (names sharing a value together, first seen first)."""
    by_value: dict[str, list[str]] = {}
    for name, v in values.items():
        by_value.setdefault(v, []).append(name)
    return groups.join(f"{names.join(n)}{sep}{v}" for v, n in by_value.items())


def shipped_defaults(catalog: TaskCatalog) -> dict[tuple[str | None, str], tuple[str, str]]:
    """Per key whose built-in runs (every algorithm with every task that ships a YAML, before overrides) do
    not all start from the schema default: (what `--keys` shows as its default, the values per run or '').
    Keyed by (None, key) for the keys every run has, (task, key) for a task's own keys (its runs only)."""
    from duorl.config.load import shipped_values  # load imports OmegaConf

    tasks = catalog.shipped()
    names = [t.name for t in tasks]
    runs = {(a, t.name): shipped_values(a, t) for a in ALGOS for t in tasks}
    out: dict[tuple[str | None, str], tuple[str, str]] = {}
    for key, info in describe().items():
        if key in _PINNED:
            continue
        got = {run: values[key] for run, values in runs.items()}
        if all(v == info.default for v in got.values()):
            continue
        distinct = {format_value(v) for v in got.values()}
        by_task = all(len({format_value(got[(a, t)]) for a in ALGOS}) == 1 for t in names)
        by_algo = all(len({format_value(got[(a, t)]) for t in names}) == 1 for a in ALGOS)
        shown = {run: format_value(v) for run, v in got.items()}
        if len(distinct) == 1:
            out[(None, key)] = (distinct.pop(), "")
        elif by_task:
            out[(None, key)] = ("per task", "per task: " + _grouped({t: shown[(ALGOS[0], t)] for t in names}))
        elif by_algo:
            out[(None, key)] = ("per algo", "per algo: " + _grouped({a: shown[(a, names[0])] for a in ALGOS}))
        else:  # per task, its algorithms grouped: 'TASK: sac 4096, flashsac/warpsac 1024; ...'
            per_task = {t: _grouped({a: shown[(a, t)] for a in ALGOS}, "/", ", ") for t in names}
            per_task = {t: v if len({shown[(a, t)] for a in ALGOS}) > 1 else shown[(ALGOS[0], t)]
                        for t, v in per_task.items()}
            out[(None, key)] = ("per algo and task", "per algo and task: " + _grouped(per_task, sep=": "))
    for task in tasks:
        for key, info in _own(task).items():
            got = {a: runs[(a, task.name)][key] for a in ALGOS}
            if all(v == info.default for v in got.values()):
                continue
            shown = {a: format_value(v) for a, v in got.items()}
            if len(set(shown.values())) == 1:
                out[(task.name, key)] = (shown[ALGOS[0]], f"its YAML; the key's default {format_value(info.default)}")
            else:
                out[(task.name, key)] = ("per algo", "per algo: " + _grouped(shown))
    return out


def resolved_listing(algo: str, task: TaskFacts, sim: str | None, overrides: list[str], default_task: str) -> str:
    """`duorl config`: the command, the task's own keys, the sources it used, then the resolved YAML.
    `default_task`: the --task flag's default (the entry layer's). Raises ConfigError."""
    from duorl.config.load import SOURCES, algo_base, config_to_dict, resolve_config

    from duorl.config.switches import data_parallel_enabled
    from duorl.config.validate import check_data_parallel_keys

    cfg, sources = resolve_config(algo, task, sim, overrides)
    check_data_parallel_keys(cfg, data_parallel_enabled(cfg, launched_rank=False))  # as `duorl train` does
    command = " ".join(["duorl config --algo", algo, "--task", task.name, *(["--sim", sim] if sim else []), *overrides])
    own = task_keys_of(task.keys)
    keys = f"task keys of {task.name}: " + (", ".join(own) if own else "none of its own") + \
        " (besides task.name, task.max_episode_steps)"
    base = algo_base(algo)
    legend = [f"  {s}: {_legend(SOURCES[s], algo, task, default_task)}"
              + (f" (on its base: defaults/algo/{base}.yaml)" if s == "algo" and base else "")
              for s in SOURCES if s in set(sources.values())]
    return resolved_yaml(config_to_dict(cfg), sources, "\n".join([command, keys, "value sources:", *legend]))


def _legend(text: str, algo: str, task: TaskFacts, default_task: str) -> str:
    return text.replace("ALGO", algo).replace("TASK_YAML", task.label).replace("DEFAULT_TASK", default_task)


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


def _yaml_settings(catalog: TaskCatalog) -> dict[str, list[str]]:
    """Per key, what the shipped YAML files set it to, equal values grouped:
    ['sac.yaml: 8192', 'flashsac.yaml, warpsac.yaml: 2048', 'TASK (sac, flashsac): 50000', ...]."""
    from duorl.config.load import layer_keys, read_algo_yaml, read_task_yaml  # load imports OmegaConf

    # key -> {(file group, value): [qualifiers]}, in first-seen order
    found: dict[str, dict[tuple[str, str], list[str]]] = {}

    def add(data: dict[str, Any], group: str, qualifier: str, task_keys: type[TaskConfig] = TaskConfig) -> None:
        for key in layer_keys(data, task_keys=task_keys):
            node: Any = data
            for part in key.split("."):
                node = node[part]
            found.setdefault(key, {}).setdefault((group, _value(node)), []).append(qualifier)

    for algo in ALGOS:
        add(read_algo_yaml(algo), "", f"{algo}.yaml")  # with its base: (warpsac.yaml: flashsac.yaml's settings)
    for task in catalog.shipped():
        data, by_name = read_task_yaml(task)
        add(data, task.name, "", task.keys)
        for algo, section in by_name.items():
            add({"algo": section}, task.name, algo)
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


def _group_of(entry: str) -> str:
    """The file group of one _yaml_settings entry: 'TASK (sac): 1' -> 'TASK'."""
    return entry.split(": ", 1)[0].split(" (", 1)[0]


def _table(infos: dict[str, KeyInfo], shipped: dict[str, list[str]]) -> list[str]:
    return ["| key | type | default | allowed | shipped YAMLs | on resume | meaning |", "|---|---|---|---|---|---|---|",
            *(_row(info, shipped.get(key, [])) for key, info in infos.items()), ""]


def markdown(catalog: TaskCatalog) -> str:
    """docs/configuration.md."""
    shipped = _yaml_settings(catalog)
    for pinned in _PINNED:
        shipped.pop(pinned, None)
    infos = _generic(catalog)
    out = [
        "# Configuration reference",
        "",
        f"<!-- Generated from src/duorl/config/schema.py and the tasks' keys: do not edit. Regenerate with `{REGENERATE}`. -->",
        "",
        "Every key `duorl train` accepts as a trailing `key=value` override. Values are layered: the schema",
        "default < `defaults/algo/ALGO.yaml` < the task's YAML (a builtin task's, and its `algo_by_name` entry",
        "for the chosen algorithm) < your overrides. The *shipped YAMLs* column says which of those files change a",
        "default; `duorl config --algo A --task T [key=value ...]` prints every resolved value with its source.",
        "An unknown key, a wrong type or a value outside *allowed* stops the command before anything is built,",
        "with one line naming the key, the value and the fix (exit code 2). *On resume*: whether a run resumed",
        "with `training.resume` may change the key (`may differ`) or must keep the checkpoint's value (`must match`).",
        "The `data parallel:` keys are read only by data-parallel runs; a one-device run refuses them unless",
        "they keep their defaults. " + _TASK_KEYS_NOTE + " [Each task's own keys](#each-tasks-own-keys) follow the",
        "sections every run has.",
        "",
    ]
    sections: dict[str, dict[str, KeyInfo]] = {}
    for key, info in infos.items():
        sections.setdefault(key.split(".", 1)[0], {})[key] = info
    for top, keys in sections.items():
        out += [f"## `{top}`", "", *_table(keys, shipped)]
    out += ["## Each task's own keys", ""]
    for task in catalog.tasks:
        own = _own(task)
        where = f" (its YAML: `{task.label}`)" if task.label else ""
        if not own:
            out += [f"### `{task.name}`", "", f"None of its own{where}: it reads the keys every task reads.", ""]
            continue
        out += [f"### `{task.name}`", "", f"Declared by `{task.keys.__module__}.{task.keys.__qualname__}`{where}.", "",
                *_table(own, {k: [v for v in shipped.get(k, []) if _group_of(v) == task.name] for k in own})]
    out += [f"*{note}*" for note in catalog.notes] + ([""] if catalog.notes else [])
    return "\n".join(out)
