"""The package's layers (docs/design.md §1): every import in src/duorl goes to a lower layer, and the
infrastructure meets algorithms and environments only through their contract modules.

The table of layers is read from docs/design.md itself, so the page a maintainer reads and the rule this
test enforces are one and the same. Imports inside functions count too: a lazy import is still an arrow.
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


def _part(path: Path) -> str:
    rel = path.relative_to(PACKAGE).parts
    return rel[0] if len(rel) > 1 else rel[0].removesuffix(".py")


def _imports(path: Path, root: Path = PACKAGE) -> list[str]:
    """Absolute names of the duorl modules this file imports (`from duorl.x import y` gives duorl.x.y
    too, so that importing a submodule by name counts as importing it)."""
    out = []
    package = ".".join(("duorl", *path.relative_to(root).parts[:-1]))
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            out += [base] + [f"{base}.{a.name}" for a in node.names]
    return [m for m in out if m == "duorl" or m.startswith("duorl.")]


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
    """The walker counts imports inside functions (the kind that slips through review)."""
    src = tmp_path / "m.py"
    src.write_text("def f():\n    from duorl.cli.train import main\n    import duorl.runtime.duo\n", encoding="utf-8")
    assert _imports(src, root=tmp_path) == ["duorl.cli.train", "duorl.cli.train.main", "duorl.runtime.duo"]
