"""The package's layers (docs/design.md §1): every import in src/duorl goes to a lower layer, no modules
import each other in a circle, the infrastructure meets algorithms and environments only through their
contract modules, and no task name is written outside the task layer.

The table of layers is read from docs/design.md itself, so the page a maintainer reads and the rule this
test enforces are one and the same. Imports inside functions count too (a lazy import is still an arrow), and
so do `importlib.import_module("duorl...")` and `__import__("duorl...")` with a literal name.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "duorl"
DESIGN = ROOT / "docs" / "design.md"
LAYER_ROW = re.compile(r"^\| (\d+) \| `([\w.]+/?)` \| (yes|no) \| .* \|$")
EXCEPTION_ROW = re.compile(r"^\| `([\w/.]+\.py)` \| `(duorl[\w.]*)` \| .* \|$")
CONTRACTS = re.compile(r"^Contract modules: (.+)$")
TASK_LAYER = re.compile(r"^The task layer: (.+)$")


def _section_one() -> list[str]:
    text = DESIGN.read_text(encoding="utf-8")
    return text.split("\n## 1. ", 1)[1].split("\n## 2. ", 1)[0].splitlines()


def _layers() -> tuple[dict[str, int], set[str]]:
    """{top-level part of duorl: rank}, and the parts that are infrastructure."""
    ranks: dict[str, int] = {}
    infrastructure: set[str] = set()
    for line in _section_one():
        m = LAYER_ROW.match(line)
        if m:
            name = m.group(2).rstrip("/").removesuffix(".py")
            ranks[name] = int(m.group(1))
            if m.group(3) == "yes":
                infrastructure.add(name)
    return ranks, infrastructure


def _exceptions() -> set[tuple[str, str]]:
    return {(m.group(1), m.group(2)) for line in _section_one() if (m := EXCEPTION_ROW.match(line))}


def _contract_modules() -> set[str]:
    for line in _section_one():
        m = CONTRACTS.match(line)
        if m:
            return {"duorl." + c.strip(" `.").removesuffix(".py").replace("/", ".") for c in m.group(1).split(",")}
    raise AssertionError("docs/design.md §1 lacks its 'Contract modules: ...' line")


def _task_layer() -> list[str]:
    """The task layer's files and folders (relative to src/duorl), from docs/design.md §1."""
    for line in _section_one():
        m = TASK_LAYER.match(line)
        if m:
            return [c.strip(" `.") for c in m.group(1).split(",")]
    raise AssertionError("docs/design.md §1 lacks its 'The task layer: ...' line")


def _part(path: Path) -> str:
    rel = path.relative_to(PACKAGE).parts
    return rel[0] if len(rel) > 1 else rel[0].removesuffix(".py")


def _imports(path: Path, root: Path = PACKAGE) -> list[str]:
    """Absolute names of the duorl modules this file imports (`from duorl.x import y` gives duorl.x.y
    too, so that importing a submodule by name counts as importing it)."""
    out = []
    package = ".".join(("duorl", *path.relative_to(root).parts[:-1]))
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if _import_call(node):
            out.append(node.args[0].value)  # type: ignore[attr-defined]
        elif isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            out += [base] + [f"{base}.{a.name}" for a in node.names]
    return [m for m in out if m == "duorl" or m.startswith("duorl.")]


def _import_call(node: ast.AST) -> bool:
    """`importlib.import_module("duorl.x")` or `__import__("duorl.x")`: an import by a literal name."""
    if not (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)):
        return False
    f = node.func
    return (isinstance(f, ast.Attribute) and f.attr == "import_module") or (isinstance(f, ast.Name) and f.id in
                                                                            ("import_module", "__import__"))


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    return ".".join(rel.parts).removesuffix(".__init__")


def _module_graph() -> dict[str, set[str]]:
    """{module: the duorl modules it imports} (`from m import name` counts as importing m, and m.name
    where that is a module; a package's __init__ is the package's name)."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = set()
        for module in _imports(path):
            while module and module not in modules:
                module = module.rpartition(".")[0]
            if module and module != name:
                targets.add(module)
        graph[name] = targets
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _arrows() -> list[tuple[Path, str, str, str]]:
    """(file, its part, imported module, that module's part) for every import between parts."""
    arrows = []
    for path in sorted(PACKAGE.rglob("*.py")):
        src = _part(path)
        for module in _imports(path):
            parts = module.split(".")
            dst = parts[1] if len(parts) > 1 else "__init__"
            if (PACKAGE / dst).is_dir() or (PACKAGE / f"{dst}.py").exists():
                if dst != src:
                    arrows.append((path, src, module, dst))
            elif dst != src and len(parts) == 2:  # `from duorl import __version__`: the package root
                arrows.append((path, src, module, "__init__"))
    return arrows


def test_every_part_of_the_package_has_a_layer() -> None:
    ranks, _ = _layers()
    parts = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    parts |= {p.stem for p in PACKAGE.glob("*.py")}
    assert parts == set(ranks), f"docs/design.md §1's layer table and src/duorl differ: {sorted(parts ^ set(ranks))}"


def test_imports_go_down_the_layers() -> None:
    ranks, _ = _layers()
    allowed = _exceptions()
    bad, used = [], set()
    for path, src, module, dst in _arrows():
        if ranks[dst] < ranks[src]:
            continue
        hit = next(((f, m) for f, m in allowed if f == str(path.relative_to(PACKAGE)) and module.startswith(m)), None)
        if hit:
            used.add(hit)
            continue
        bad.append(f"{path.relative_to(ROOT)} imports {module}: {src} (layer {ranks[src]}) -> {dst} (layer {ranks[dst]})")
    assert not bad, "an import goes up or sideways (docs/design.md §1):\n" + "\n".join(sorted(set(bad)))
    assert used == allowed, f"docs/design.md §1 lists an exception that no longer exists: {sorted(allowed - used)}"


def test_infrastructure_meets_algorithms_and_envs_only_through_their_contracts() -> None:
    _, infrastructure = _layers()
    contracts = _contract_modules()
    bad = [f"{path.relative_to(ROOT)} imports {module}" for path, src, module, dst in _arrows()
           if src in infrastructure and dst in ("algos", "envs")
           and not any(module == c or module.startswith(c + ".") for c in contracts)]
    assert not bad, "infrastructure imports a concrete algorithm or task (docs/design.md §1):\n" + "\n".join(bad)


def test_the_rule_sees_a_lazy_upward_import(tmp_path: Path) -> None:
    """The walker counts imports inside functions and under TYPE_CHECKING, and imports by a literal name
    (the kinds that slip through review)."""
    src = tmp_path / "m.py"
    src.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from duorl.envs.base import EnvSpec\n"
                   "def f():\n    from duorl.cli.train import main\n    import duorl.runtime.duo\n"
                   "    importlib.import_module('duorl.envs.mjlab')\n    __import__('duorl.mps')\n", encoding="utf-8")
    assert sorted(_imports(src, root=tmp_path)) == sorted([
        "duorl.envs.base", "duorl.envs.base.EnvSpec", "duorl.cli.train", "duorl.cli.train.main", "duorl.runtime.duo",
        "duorl.envs.mjlab", "duorl.mps"])


def test_no_modules_import_each_other_in_a_circle() -> None:
    """A circle (a -> b -> ... -> a, any import counted) ties modules so that neither can change or load
    alone; within one folder too."""
    circles = _circles(_module_graph())
    assert not circles, "modules import each other in a circle:\n" + "\n".join(" <-> ".join(c) for c in circles)


def test_the_circle_finder_finds_one() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def _task_words() -> re.Pattern[str]:
    from duorl.envs.mjlab.family import PREFIX
    from duorl.envs.tasks.builtin import BUILTIN

    return re.compile(r"\b(?:" + "|".join(map(re.escape, sorted(BUILTIN))) + r")\b|" + re.escape(PREFIX))


def test_no_task_name_outside_the_task_layer() -> None:
    """A task's facts live in the task layer (docs/design.md §1): no builtin task's name and no `mjlab:`
    prefix anywhere else in src/duorl, in code, strings or comments; the rest of the package reads a task's
    facts from its source (envs/task_sources.py)."""
    layer = _task_layer()
    assert all((PACKAGE / entry.rstrip("/")).exists() for entry in layer), layer
    words = _task_words()
    hits = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if any(rel == entry or (entry.endswith("/") and rel.startswith(entry)) for entry in layer):
            continue
        hits += [f"src/duorl/{rel}:{i}: {line.strip()}" for i, line in enumerate(path.read_text(encoding="utf-8")
                                                                            .splitlines(), 1) if words.search(line)]
    assert not hits, "a task name outside the task layer (read the task's facts from its source):\n" + "\n".join(hits)


def test_the_task_name_grep_sees_a_name() -> None:
    words = _task_words()
    assert words.search('if cfg.task.name == "g1_walk_flat":') and words.search("startswith('mjlab:')")
    assert not words.search("g1_walk_flatter = 1")


def _is_module(name: str) -> bool:
    base = PACKAGE.parent.joinpath(*name.split("."))
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists()


def _reach_ins(path: Path, module: str) -> list[str]:
    """`from duorl.x import _name` (x another module) and `mod._name` on a duorl module bound by an import:
    a private name of another module, read from outside it."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    bound: set[str] = set()  # local names bound to a duorl module by an import
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("duorl") and node.module != module:
            for a in node.names:
                if a.name.startswith("_") and not a.name.startswith("__"):
                    out.append(f"{where}:{node.lineno}: from {node.module} import {a.name}")
                elif _is_module(f"{node.module}.{a.name}"):
                    bound.add(a.asname or a.name)  # a submodule (`from duorl.mps import probe as _probe`)
        elif isinstance(node, ast.Import):
            bound |= {a.asname for a in node.names if a.asname and a.name.startswith("duorl.")}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound
                and node.attr.startswith("_") and not node.attr.startswith("__")):
            out.append(f"{where}:{node.lineno}: {node.value.id}.{node.attr}")
    return out


def test_no_module_reaches_into_another_modules_private_names() -> None:
    """A module uses another module's public names only (a name it needs is made public there)."""
    hits = [hit for path in sorted(PACKAGE.rglob("*.py")) for hit in _reach_ins(path, _module_name(path))]
    assert not hits, "private names read from another module (make them public there):\n" + "\n".join(hits)


def test_the_reach_in_rule_sees_one(tmp_path: Path) -> None:
    f = tmp_path / "m.py"
    f.write_text("from duorl.envs.vec_env import _select, select_obs\nfrom duorl.mps import probe as _p\n"
                 "x = _p._pids\ny = _p.pids_in\n")
    hits = _reach_ins(f.resolve(), "duorl.other")
    assert [h.split(": ", 1)[1] for h in hits] == ["from duorl.envs.vec_env import _select", "_p._pids"], hits
