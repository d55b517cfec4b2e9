"""Layering: the modules of harnessrl import each other without cycles (read from the source with
ast, so nothing is imported). Every import counts, also those inside functions (a lazy import is
still a dependency), except those under `if TYPE_CHECKING:`, which only name a type for an
annotation and never run."""

from __future__ import annotations

import ast
from pathlib import Path

import harnessrl

SRC = Path(harnessrl.__file__).resolve().parent.parent
# packages whose modules must form no cycle; the others are listed in KNOWN_CYCLES until fixed
ACYCLIC = ("harnessrl.train", "harnessrl.render", "harnessrl.run", "harnessrl.rollout", "harnessrl.tree",
           "harnessrl.algo", "harnessrl.tasks", "harnessrl.store", "harnessrl.sandbox", "harnessrl.engine")


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


def test_no_import_cycles_in_the_layered_packages():
    found = [c for c in cycles(import_graph()) if any(m.startswith(ACYCLIC) for m in c)]
    assert found == [], f"import cycles: {found}"
