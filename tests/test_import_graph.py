"""Layering: the modules of harnessrl import each other without cycles, and so do its packages
(read from the source with ast, so nothing is imported). Every import counts, also those inside
functions (a lazy import is still a dependency), except those under `if TYPE_CHECKING:`, which only
name a type for an annotation and never run.

The command modules (`harnessrl/cli.py` and each stage's `cli.py`) sit on top: their imports are
not checked, and nothing else may import them."""

from __future__ import annotations

import ast
from pathlib import Path

import harnessrl

SRC = Path(harnessrl.__file__).resolve().parent.parent


def _module(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def import_graph() -> dict[str, set[str]]:
    """module -> the harnessrl modules it imports (anywhere in the file)."""
    modules = {_module(p): p for p in (SRC / "harnessrl").rglob("*.py")}

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for mod, path in modules.items():
        deps: set[str | None] = set()
        tree = ast.parse(path.read_text())
        type_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If) and _is_type_checking(block.test)
                     for stmt in block.body for n in ast.walk(stmt)}
        for node in ast.walk(tree):
            if id(node) in type_only:
                continue
            if isinstance(node, ast.Import):
                deps |= {owner(a.name) for a in node.names if a.name.startswith("harnessrl")}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("harnessrl"):
                for a in node.names:
                    full = f"{node.module}.{a.name}"
                    deps.add(full if full in modules else owner(node.module))
        graph[mod] = {d for d in deps if d and d != mod}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on_stack.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def is_cli(module: str) -> bool:
    return module == "harnessrl.cli" or module.endswith(".cli")


def package(module: str) -> str:
    """The top-level package of a module (harnessrl.run.loop -> harnessrl.run); a module directly
    in harnessrl (errors.py) is its own."""
    return ".".join(module.split(".")[:2])


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """package -> the other packages its modules import (command modules left out)."""
    out: dict[str, set[str]] = {}
    for mod, deps in graph.items():
        if is_cli(mod):
            continue
        out.setdefault(package(mod), set()).update(package(d) for d in deps if not is_cli(d))
    return {p: deps - {p} for p, deps in out.items()}


def test_cycle_finder_sees_packages():
    graph = {"harnessrl.a.x": {"harnessrl.b.y"}, "harnessrl.b.y": set(), "harnessrl.b.z": {"harnessrl.a.w"},
             "harnessrl.a.w": set(), "harnessrl.a.cli": {"harnessrl.b.y"}}
    assert cycles(graph) == []  # no module cycle ...
    assert cycles(package_graph(graph)) == [["harnessrl.a", "harnessrl.b"]]  # ... but a package cycle


def test_no_import_cycles_between_modules():
    found = [c for c in cycles(import_graph()) if not all(is_cli(m) for m in c)]
    assert found == [], f"import cycles: {found}"


def test_no_import_cycles_between_packages():
    found = cycles(package_graph(import_graph()))
    assert found == [], f"package import cycles: {found}"


def test_nothing_imports_a_command_module():
    graph = import_graph()
    found = {mod: sorted(d for d in deps if is_cli(d)) for mod, deps in graph.items() if not is_cli(mod)}
    assert {m: d for m, d in found.items() if d} == {}


def test_the_local_backend_imports_nothing_from_cluster():
    """cluster/ is for cluster.backend=ray only: the run's modules load without it (and without ray)."""
    import subprocess
    import sys

    code = ("import sys, harnessrl.run.loop, harnessrl.run.runner_collector, harnessrl.run.setup; "
            "print(sorted(m for m in sys.modules if m.startswith('harnessrl.cluster') or m.split('.')[0] == 'ray'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"
