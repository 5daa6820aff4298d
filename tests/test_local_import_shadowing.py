"""No function in the package reads a name before a local import binds it (`import torch._dynamo` inside a
function makes `torch` local to all of it: an earlier `torch.cuda...` then raises UnboundLocalError, on a
path CPU tests may never reach). Checked statically, over every module of src/duorl."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "duorl"


def _import_bindings(fn: ast.AST) -> dict[str, int]:
    """Names bound by import statements in the function's own body (not nested functions), first line each."""
    bound: dict[str, int] = {}
    stack = list(ast.iter_child_nodes(fn))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                name = alias.asname or alias.name.split(".")[0]
                bound[name] = min(bound.get(name, node.lineno), node.lineno)
        stack.extend(ast.iter_child_nodes(node))
    return bound


def _reads_before(fn: ast.AST, name: str, line: int) -> list[int]:
    lines = []
    stack = list(ast.iter_child_nodes(fn))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load) and node.lineno < line:
            lines.append(node.lineno)
        stack.extend(ast.iter_child_nodes(node))
    return lines


def _offences(path: Path, root: Path = SRC.parent) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for name, line in _import_bindings(fn).items():
            for read in _reads_before(fn, name, line):
                found.append(f"{path.relative_to(root)}:{read}: {fn.name} reads {name!r} before line {line} imports it locally")
    return found


def test_the_checker_finds_the_shadowing_import(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("import torch\n\ndef f():\n    torch.cuda.set_device(0)\n    import torch._dynamo\n\n"
                     "def g():\n    import torch._dynamo\n    torch.manual_seed(0)\n")
    assert _offences(probe, tmp_path) == ["probe.py:4: f reads 'torch' before line 5 imports it locally"]


def test_no_function_reads_a_name_before_its_local_import() -> None:
    offences = [o for path in sorted(SRC.rglob("*.py")) for o in _offences(path)]
    assert not offences, "\n".join(offences)
