"""The configuration's trip: from `duorl.cli.train:train`, the calls that take the configuration, read from
the source alone (no import of duorl, no run). Definitions: benchmarks/2026-12-02_config_trip_cpu/README.md.

A value *carries the configuration* when it is the start's `cfg` parameter, a section of a carrier
(`cfg.training`, `run.cfg`, `settings.config`, `cfg.training.nan_guard`: attributes named by the schema's
sections, `cfg`/`config`, or an attribute a constructor stored a carrier in), a name bound to a carrier, or
an object whose constructor stored a carrier on `self`. A method call resolves where the receiver's class is
known from the source: `self`, a parameter annotated with a duorl class, a name bound to a constructor or to a
function whose return annotation names a duorl class. A call is *followed* when its target resolves to a
function, class or method in duorl and it passes a carrier (positionally, by keyword, through
`functools.partial`, or as the receiver of a method call); each followed call is one *stop*, in the order
the source makes them (depth first), and the callee's parameters that received a carrier are carriers there.

    python benchmarks/scripts/config_trip.py [--src SRC] [--design docs/design.md] [--trace]

prints JSON: stops, modules, climbs, the most visits to one module, visits per module and (--trace) every
stop with its depth and rank.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LAYER_ROW = re.compile(r"^\| (\d+) \| `([\w.]+/?)` \| (yes|no) \| .* \|$")
START = ("duorl.cli.train", "train", "cfg")
MAX_STOPS = 5000  # a guard: a trip that long is a bug in this tool, not a measurement


@dataclass
class Module:
    name: str
    tree: ast.Module
    functions: dict[str, ast.FunctionDef] = field(default_factory=dict)
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    imports: dict[str, str] = field(default_factory=dict)  # local name -> "duorl.mod" or "duorl.mod:name"


def _index(src: Path) -> dict[str, Module]:
    mods: dict[str, Module] = {}
    for path in sorted((src / "duorl").rglob("*.py")):
        name = ".".join(path.relative_to(src).with_suffix("").parts).removesuffix(".__init__")
        m = Module(name, ast.parse(path.read_text(encoding="utf-8")))
        for node in m.tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                m.functions[node.name] = node  # type: ignore[assignment]
            elif isinstance(node, ast.ClassDef):
                m.classes[node.name] = node
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(m.tree):  # imports anywhere in the module, those inside functions too
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith("duorl"):
                        m.imports[a.asname or a.name.split(".")[0]] = a.asname and a.name or a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
                if base.startswith("duorl"):
                    for a in node.names:
                        m.imports[a.asname or a.name] = f"{base}:{a.name}"
        mods[name] = m
    return mods


def _sections(mods: dict[str, Module]) -> set[str]:
    """The attribute names of the configuration's sections: fields of config/schema.py's dataclasses whose
    type is another of them (training, algo, task, sim, debug, nan_guard, algo_params)."""
    schema = mods["duorl.config.schema"]
    out = set()
    for cls in schema.classes.values():
        for node in cls.body:
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                ann = ast.unparse(node.annotation)
                if any(re.search(rf"\b{c}\b", ann) for c in schema.classes):
                    out.add(node.target.id)
    return out


def _ranks(design: Path) -> dict[str, int]:
    out = {}
    for line in design.read_text(encoding="utf-8").splitlines():
        m = LAYER_ROW.match(line)
        if m:
            out[m.group(2).rstrip("/").removesuffix(".py")] = int(m.group(1))
    return out


@dataclass
class Target:
    module: str
    qualname: str  # "f", "Cls", "Cls.method"
    node: Any  # FunctionDef or ClassDef
    cls: str | None = None  # the class a method belongs to


class Trip:
    def __init__(self, mods: dict[str, Module], sections: set[str]) -> None:
        self.mods = mods
        self.attrs = sections | {"cfg", "config"}  # grows as constructors store carriers on self
        self.stops: list[tuple[int, str, str]] = []  # (depth, module, qualname)
        self.stack: list[tuple[str, str]] = []

    # -- resolving a call's target ---------------------------------------------------------------
    def _lookup(self, module: str, name: str, hops: int = 0) -> Target | None:
        m = self.mods.get(module)
        if m is None or hops > 5:
            return None
        if name in m.functions:
            return Target(module, name, m.functions[name])
        if name in m.classes:
            return Target(module, name, m.classes[name], name)
        ref = m.imports.get(name)  # a re-export
        if ref and ":" in ref:
            mod, n = ref.split(":")
            return self._lookup(mod, n, hops + 1)
        return None

    def _module_of(self, module: str, name: str) -> str | None:
        """The duorl module a local name is bound to (`import duorl.x as y`, `from duorl import x`)."""
        ref = self.mods[module].imports.get(name)
        if ref is None:
            return None
        if ":" in ref:
            mod, n = ref.split(":")
            return f"{mod}.{n}" if f"{mod}.{n}" in self.mods else None
        return ref if ref in self.mods else None

    def _method(self, cls_target: Target, name: str) -> Target | None:
        cls = cls_target.node
        for node in cls.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
                return Target(cls_target.module, f"{cls.name}.{name}", node, cls.name)
        for base in cls.bases:  # bases within duorl, by name
            if isinstance(base, ast.Name):
                b = self._lookup(cls_target.module, base.id)
                if b is not None and isinstance(b.node, ast.ClassDef):
                    found = self._method(b, name)
                    if found is not None:
                        return found
        return None

    def _resolve(self, module: str, func: ast.expr, scope: "Scope") -> tuple[Target | None, bool]:
        """(the target, whether the receiver carries the configuration)."""
        if isinstance(func, ast.Name):
            return self._lookup(module, func.id), False
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            base = func.value.id
            mod = self._module_of(module, base) if base not in scope.types else None
            if mod is not None:
                return self._lookup(mod, func.attr), False
            cls = scope.types.get(base)
            if cls is not None:
                return self._method(cls, func.attr), scope.carries(func.value)
        return None, False

    def returned_class(self, t: Target) -> Target | None:
        """The duorl class a function's return annotation names (`-> TaskSource`), if any."""
        ret = getattr(t.node, "returns", None)
        if ret is None:
            return None
        c = self._lookup(t.module, ast.unparse(ret).strip("'\"").split("[")[0].split(" ")[0])
        return c if c is not None and isinstance(c.node, ast.ClassDef) else None

    # -- walking one function -------------------------------------------------------------------
    def visit(self, target: Target, carried: set[str], self_type: Target | None, depth: int) -> None:
        key = (target.module, target.qualname)
        self.stops.append((depth, target.module, target.qualname))
        if key in self.stack or len(self.stops) > MAX_STOPS:
            return
        node = target.node
        if isinstance(node, ast.ClassDef):  # a constructor: its __init__ (a dataclass has none)
            init = self._method(target, "__init__")
            if init is None:
                return
            node = init.node
            target = init
        self.stack.append(key)
        scope = Scope(self, target.module, carried)
        if self_type is not None:
            scope.types["self"] = self_type
        if target.cls is not None and "self" not in scope.types:
            scope.types["self"] = Target(target.module, target.cls, self.mods[target.module].classes.get(
                target.cls) or self._lookup(target.module, target.cls).node, target.cls)  # type: ignore[union-attr]
        for arg in node.args.args + node.args.kwonlyargs:
            if arg.annotation is not None:  # a parameter typed by a duorl class: its methods resolve
                t = self._lookup(target.module, ast.unparse(arg.annotation).strip("'\"").split("[")[0].split(" ")[0])
                if t is not None and isinstance(t.node, ast.ClassDef):
                    scope.types.setdefault(arg.arg, t)
        for stmt in node.body:
            scope.statement(stmt, depth)
        self.stack.pop()


class Scope:
    def __init__(self, trip: Trip, module: str, carried: set[str]) -> None:
        self.trip, self.module = trip, module
        self.names = set(carried)
        self.types: dict[str, Target] = {}

    def carries(self, e: ast.expr | None) -> bool:
        if isinstance(e, ast.Name):
            return e.id in self.names
        if isinstance(e, ast.Attribute):
            return e.attr in self.trip.attrs and self.carries(e.value)
        if isinstance(e, ast.Starred):
            return self.carries(e.value)
        return False

    def statement(self, stmt: ast.stmt, depth: int) -> None:
        # calls first, in source order (a nested function's body is not walked: it runs when it is called)
        for node in _in_order(stmt):
            if isinstance(node, ast.Call):
                self.call(node, depth)
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for t in targets:
                self.bind(t, stmt.value)
        elif isinstance(stmt, ast.With):
            for item in stmt.items:
                if item.optional_vars is not None:
                    self.bind(item.optional_vars, item.context_expr)
        for child in ast.iter_child_nodes(stmt):  # the bodies of if/for/while/try/with, in order
            if isinstance(child, ast.stmt) and not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                      ast.ClassDef)):
                self.statement_body(child, depth)
        for handler in getattr(stmt, "handlers", []):
            for s in handler.body:
                self.statement(s, depth)

    def statement_body(self, stmt: ast.stmt, depth: int) -> None:
        self.statement(stmt, depth)

    def bind(self, target: ast.expr, value: ast.expr | None) -> None:
        if value is None:
            return
        if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
            for t, v in zip(target.elts, value.elts):
                self.bind(t, v)
            return
        if isinstance(target, ast.Tuple):  # a, b = x: each carries when x does
            for t in target.elts:
                self.bind(t, value if self.carries(value) else None)
            return
        carried = self.carries(value)
        if isinstance(value, ast.Call):  # an object built from a carrier keeps it (if its class stores it)
            t, _ = self.trip._resolve(self.module, value.func, self)
            returned = self.trip.returned_class(t) if t is not None and isinstance(target, ast.Name) else None
            if returned is not None:  # `source = source_of(...)` typed `-> TaskSource`: its methods resolve
                self.types[target.id] = returned  # type: ignore[union-attr]
            if t is not None and isinstance(t.node, ast.ClassDef):
                if isinstance(target, ast.Name):
                    self.types[target.id] = t
                stores = _stores_carrier(t)
                args = [*value.args, *(k.value for k in value.keywords)]
                carried = stores and any(self.carries(a) for a in args)
        if isinstance(target, ast.Name):
            (self.names.add if carried else self.names.discard)(target.id)
        elif (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self"
              and carried):
            self.trip.attrs.add(target.attr)  # self.settings = settings: `.settings` carries
            self.names.add("self")
        elif isinstance(target, ast.Attribute) and carried and self.carries(target.value) is False:
            self.trip.attrs.add(target.attr)  # run.checked = ... a carrier stored on a carrier

    def call(self, node: ast.Call, depth: int) -> None:
        func, args, keywords = node.func, list(node.args), list(node.keywords)
        if _is_partial(func) and args:  # functools.partial(f, ...): the configuration goes to f
            func, args = args[0], args[1:]
        target, receiver = self.trip._resolve(self.module, func, self)
        if target is None:
            return
        params = _params(target)
        carried: set[str] = set()
        for i, a in enumerate(args):
            if self.carries(a) and i < len(params):
                carried.add(params[i])
        for k in keywords:
            if k.arg is not None and self.carries(k.value):
                carried.add(k.arg)
        if not carried and not receiver:
            return
        self_type = None
        if receiver and isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            self_type = self.types.get(func.value.id)
            carried.add("self")
        self.trip.visit(target, carried, self_type, depth + 1)


def _in_order(stmt: ast.stmt) -> list[ast.AST]:
    """The expressions of one statement (not of the statements nested in it), in source order."""
    out: list[ast.AST] = []

    def walk(n: ast.AST) -> None:
        for child in ast.iter_child_nodes(n):
            if isinstance(child, (ast.stmt, ast.excepthandler, ast.Lambda)):
                continue
            walk(child)  # arguments before the call that takes them
            out.append(child)

    walk(stmt)
    return out


def _is_partial(func: ast.expr) -> bool:
    return (isinstance(func, ast.Attribute) and func.attr == "partial") or (isinstance(func, ast.Name)
                                                                             and func.id == "partial")


def _params(t: Target) -> list[str]:
    node = t.node
    if isinstance(node, ast.ClassDef):  # a dataclass: its fields in order; otherwise __init__'s
        init = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
        if init is None:
            return [n.target.id for n in node.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)]
        names = [a.arg for a in init.args.args]
        return names[1:]
    names = [a.arg for a in node.args.args]
    return names[1:] if t.cls is not None and names[:1] in (["self"], ["cls"]) else names


def _stores_carrier(t: Target) -> bool:
    """Whether the class keeps what it is given: a dataclass, or an __init__ that assigns a parameter to self."""
    node = t.node
    if any(ast.unparse(d).split("(")[0].endswith("dataclass") for d in node.decorator_list):
        return True
    init = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    if init is None:
        return False
    params = {a.arg for a in init.args.args[1:]}
    return any(isinstance(n, ast.Assign) and isinstance(n.value, ast.Name) and n.value.id in params
               and any(isinstance(x, ast.Attribute) for x in n.targets) for n in ast.walk(init))


def measure(src: Path, design: Path) -> dict[str, Any]:
    mods = _index(src)
    trip = Trip(mods, _sections(mods))
    start = trip._lookup(START[0], START[1])
    assert start is not None, f"{START[0]}:{START[1]} not found under {src}"
    trip.visit(start, {START[2]}, None, 0)
    ranks = _ranks(design)

    def rank(module: str) -> int:
        parts = module.split(".")
        return ranks.get(parts[1] if len(parts) > 1 else "__init__", -1)

    visits: dict[str, int] = {}
    climbs, prev = [], None
    for i, (_, mod, qual) in enumerate(trip.stops):
        if prev is None or prev[1] != mod:
            visits[mod] = visits.get(mod, 0) + 1
        if prev is not None and rank(mod) > rank(prev[1]):
            climbs.append(f"{prev[1]}:{prev[2]} (rank {rank(prev[1])}) -> {mod}:{qual} (rank {rank(mod)})")
        prev = trip.stops[i]
    return {
        "start": f"{START[0]}:{START[1]}",
        "stops": len(trip.stops),
        "modules": len({m for _, m, _ in trip.stops}),
        "climbs": len(climbs),
        "max_visits": max(visits.values()),
        "visits": dict(sorted(visits.items(), key=lambda kv: (-kv[1], kv[0]))),
        "climb_list": climbs,
        "trace": [f"{'  ' * d}{m}:{q} (rank {rank(m)})" for d, m, q in trip.stops],
    }


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    here = Path(__file__).resolve().parents[2]
    p.add_argument("--src", type=Path, default=here / "src", help="the folder holding duorl/ (default: this tree's)")
    p.add_argument("--design", type=Path, default=None, help="the page with the layer table (default: SRC/../docs/design.md)")
    p.add_argument("--trace", action="store_true", help="also every stop, indented by depth")
    a = p.parse_args(argv)
    out = measure(a.src, a.design or a.src.parent / "docs" / "design.md")
    if not a.trace:
        out.pop("trace")
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
