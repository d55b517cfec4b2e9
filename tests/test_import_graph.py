"""Layering: the modules of harnessrl import each other without cycles, and so do its packages
(read from the source with ast, so nothing is imported). Every import counts, also those inside
functions (a lazy import is still a dependency). Imports under `if TYPE_CHECKING:` only name a type
for an annotation and never run: cycles leave them out, but the layering rules count them.

The app package (`harnessrl.app`: every command and the recipes they share) sits on top: its
imports are not checked for cycles with the library, and no library module imports it, not even
for a type. No library package keeps a command module (`cli.py`) of its own.

The library packages stand in tiers (STACK, bottom to top): a package imports only the tiers below
its own. The step (run/) sits above what it reports (report/, profile/) and below what is built on
it (experiment/, sft/); the pure-Python core (tree/, algo/, tasks/) loads without torch or vLLM."""

from __future__ import annotations

import ast
from pathlib import Path

import harnessrl

SRC = Path(harnessrl.__file__).resolve().parent.parent


def _module(path: Path, src: Path = SRC) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def import_graph(type_only_too: bool = False, src: Path = SRC) -> dict[str, set[str]]:
    """module -> the harnessrl modules it imports (anywhere in the file; with `type_only_too`, also
    those under `if TYPE_CHECKING:`)."""
    modules = {_module(p, src): p for p in (src / "harnessrl").rglob("*.py")}

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
            if id(node) in type_only and not type_only_too:
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


APP = "harnessrl.app"


def is_app(module: str) -> bool:
    """A module of the top layer: the app package (commands and recipes)."""
    return module == APP or module.startswith(APP + ".")


def package(module: str) -> str:
    """The top-level package of a module (harnessrl.run.loop -> harnessrl.run); a module directly
    in harnessrl (errors.py) is its own."""
    return ".".join(module.split(".")[:2])


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """package -> the other packages its modules import (the app package left out)."""
    out: dict[str, set[str]] = {}
    for mod, deps in graph.items():
        if is_app(mod):
            continue
        out.setdefault(package(mod), set()).update(package(d) for d in deps if not is_app(d))
    return {p: deps - {p} for p, deps in out.items()}


def test_cycle_finder_sees_packages():
    graph = {"harnessrl.a.x": {"harnessrl.b.y"}, "harnessrl.b.y": set(), "harnessrl.b.z": {"harnessrl.a.w"},
             "harnessrl.a.w": set(), "harnessrl.app.x": {"harnessrl.b.y"}}
    assert cycles(graph) == []  # no module cycle ...
    assert cycles(package_graph(graph)) == [["harnessrl.a", "harnessrl.b"]]  # ... but a package cycle


def test_no_import_cycles_between_modules():
    found = cycles(import_graph())
    assert found == [], f"import cycles: {found}"


def test_no_import_cycles_between_packages():
    found = cycles(package_graph(import_graph()))
    assert found == [], f"package import cycles: {found}"


def test_the_library_never_imports_the_app_package():
    """Not at run time, not lazily inside a function, not for a type under TYPE_CHECKING."""
    graph = import_graph(type_only_too=True)
    assert APP in {package(m) for m in graph}  # the app package is there to be checked
    found = {mod: sorted(d for d in deps if is_app(d)) for mod, deps in graph.items() if not is_app(mod)}
    assert {m: d for m, d in found.items() if d} == {}


def test_type_only_imports_are_seen(tmp_path):
    """An import that only a TYPE_CHECKING block makes is left out of the graph for cycles and
    counted with `type_only_too`, so a library module naming an app type is caught."""
    (tmp_path / "harnessrl" / "app").mkdir(parents=True)
    (tmp_path / "harnessrl" / "app" / "cmd.py").write_text("X = 1\n")
    (tmp_path / "harnessrl" / "lib.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from harnessrl.app.cmd import X\n")
    assert import_graph(src=tmp_path)["harnessrl.lib"] == set()
    assert import_graph(type_only_too=True, src=tmp_path)["harnessrl.lib"] == {"harnessrl.app.cmd"}


def test_commands_live_only_in_the_app_package():
    """No library package keeps a `cli.py` (or a module that builds a typer app): commands sit on top."""
    found = sorted(str(p.relative_to(SRC)) for p in (SRC / "harnessrl").rglob("*.py")
                   if not is_app(_module(p)) and (p.name == "cli.py" or "typer.Typer(" in p.read_text()
                                                  or "import typer" in p.read_text()))
    assert found == []


def test_no_cycles_between_library_packages_with_type_only_imports():
    """Counting the TYPE_CHECKING imports too, the library packages still form no loop."""
    found = cycles(package_graph(import_graph(type_only_too=True)))
    assert found == [], f"package import cycles (type-only imports counted): {found}"


def test_the_local_backend_imports_nothing_from_cluster():
    """cluster/ is for cluster.backend=ray only: the run's modules load without it (and without ray)."""
    import subprocess
    import sys

    code = ("import sys, harnessrl.run.loop, harnessrl.run.runner_collector, harnessrl.run.trainer_setup; "
            "print(sorted(m for m in sys.modules if m.startswith('harnessrl.cluster') or m.split('.')[0] == 'ray'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"


def test_the_learning_core_imports_nothing_from_the_runner():
    """algo/ and tree/ (the learning core) import nothing from rollout/ (the runner), not even a
    type: the pass rule and the stored groups they read live in store/."""
    graph = import_graph(type_only_too=True)
    core = ("harnessrl.algo", "harnessrl.tree")
    found = {m: sorted(d for d in deps if package(d) == "harnessrl.rollout")
             for m, deps in graph.items() if package(m) in core}
    assert {m: d for m, d in found.items() if d} == {}


# The stack, bottom to top: a library package imports only packages of the tiers below its own
# (counting TYPE_CHECKING imports; the app package sits above them all). A new package takes its place here.
STACK: list[tuple[str, set[str]]] = [
    ("shared leaves", {"errors", "plain_progress"}),
    ("records and backends", {"store", "sandbox", "engine"}),
    ("core: rendering, trees, tasks", {"render", "tree", "tasks"}),
    ("serving and learning", {"proxy", "train", "algo"}),
    ("harnesses", {"harness"}),
    ("rollouts", {"rollout"}),
    ("the Ray backend", {"cluster"}),
    ("the run config and what a run reports", {"config", "report"}),
    ("standing up serving, and a run's costs", {"launch", "profile"}),
    ("the step", {"run"}),
    ("built on the step", {"experiment", "sft"}),
]


def tier_of() -> dict[str, int]:
    return {f"harnessrl.{name}": i for i, (_, names) in enumerate(STACK) for name in names}


def test_every_library_package_has_a_tier():
    tiers = tier_of()
    found = sorted(p for p in package_graph(import_graph(type_only_too=True)) if p != "harnessrl" and p not in tiers)
    assert found == [], f"packages missing from STACK in {__file__}: {found}"


def test_no_package_imports_up_the_stack():
    """report/, profile/, experiment/ and sft/ read what the step records; the step (run/) calls
    report/ and profile/, and experiment/ and sft/ are built on it: nothing imports up."""
    tiers = tier_of()
    graph = package_graph(import_graph(type_only_too=True))
    found = {p: sorted(d for d in deps if d in tiers and tiers[d] >= tiers[p])
             for p, deps in graph.items() if p in tiers}
    assert {p: d for p, d in found.items() if d} == {}, "imports up (or across) the stack"


def test_the_step_is_not_imported_by_what_it_reports():
    """report/ and profile/ never import run/, not even for a type: the step imports them."""
    graph = import_graph(type_only_too=True)
    found = {m: sorted(d for d in deps if package(d) == "harnessrl.run")
             for m, deps in graph.items() if package(m) in ("harnessrl.report", "harnessrl.profile")}
    assert {m: d for m, d in found.items() if d} == {}


def test_the_schema_is_imported_from_config_and_launch_names_from_launch():
    """The config schema has one home (harnessrl.config): no run/config.py re-export is left, and
    nothing in src/, tests/ or benchmarks/ imports harnessrl.run.config. The serving names
    (start_proxy, local_proxy, run_renderer, served_model_dir) are imported from harnessrl.launch,
    not through run/runner_collector."""
    assert not (SRC / "harnessrl" / "run" / "config.py").exists()
    root = SRC.parent
    launch_names = {"start_proxy", "local_proxy", "run_renderer", "served_model_dir"}
    found = []
    for d in ("src", "tests", "benchmarks"):
        for p in (root / d).rglob("*.py"):
            for node in ast.walk(ast.parse(p.read_text())):
                if isinstance(node, ast.ImportFrom) and node.level == 0:
                    mod, names = node.module or "", {a.name for a in node.names}
                    if mod == "harnessrl.run.config" or (mod == "harnessrl.run" and "config" in names) or \
                            (mod == "harnessrl.run.runner_collector" and names & launch_names):
                        found.append(f"{p.relative_to(root)}:{node.lineno}")
                elif isinstance(node, ast.Import) and any(a.name == "harnessrl.run.config" for a in node.names):
                    found.append(f"{p.relative_to(root)}:{node.lineno}")
    assert found == []


def test_the_core_imports_without_torch_or_vllm():
    """Every module of tree/, algo/ and tasks/ (the pure-Python core) loads without torch,
    transformers or vLLM."""
    import subprocess
    import sys

    code = ("import importlib, pkgutil, sys\n"
            "for name in ('harnessrl.tree', 'harnessrl.algo', 'harnessrl.tasks'):\n"
            "    pkg = importlib.import_module(name)\n"
            "    for m in pkgutil.iter_modules(pkg.__path__):\n"
            "        importlib.import_module(f'{name}.{m.name}')\n"
            "print(sorted(m for m in ('torch', 'transformers', 'vllm') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"
