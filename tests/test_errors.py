"""One root exception: every error class in src/ derives from HarnessRLError, and the tree drawn in
harnessrl/errors.py's docstring is the tree in the code (names, parents and modules)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import harnessrl.errors
from harnessrl.errors import HarnessRLError

PKG = Path(harnessrl.errors.__file__).resolve().parent
BUILTIN_BASES = {"Exception", "RuntimeError", "ValueError", "FileNotFoundError", "OSError", "KeyError"}


def _drawn_tree() -> dict[str, tuple[str, str | None]]:
    """name -> (parent, module file) from the docstring drawing; nested entries inherit the file."""
    out: dict[str, tuple[str, str | None]] = {}
    parents: list[tuple[int, str]] = [(-1, "HarnessRLError")]
    files: dict[str, str | None] = {"HarnessRLError": "errors.py"}
    for line in harnessrl.errors.__doc__.splitlines():
        m = re.match(r"^(\s*(?:[│ ]\s*)*)[├└]── (\w+)\s*(\S+\.py)?", line)
        if not m:
            continue
        depth, name, file = len(m.group(1)), m.group(2), m.group(3)
        while parents[-1][0] >= depth:
            parents.pop()
        parent = parents[-1][1]
        files[name] = file or files[parent]
        out[name] = (parent, files[name])
        parents.append((depth, name))
    return out


def _error_classes() -> dict[str, tuple[list[str], str]]:
    """name -> (base names, module file relative to the package) for every exception class in src."""
    classes: dict[str, tuple[list[str], str]] = {}
    for path in PKG.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                bases = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases]
                classes[node.name] = (bases, str(path.relative_to(PKG)))
    errors = {"HarnessRLError"}
    grew = True
    while grew:
        new = {n for n, (bases, _) in classes.items() if n not in errors and not n.endswith("Warning")
               and any(b in errors or b in BUILTIN_BASES for b in bases)}
        errors |= new
        grew = bool(new)
    return {n: classes[n] for n in errors}


def test_every_error_class_is_in_the_drawn_tree_under_its_parent():
    drawn = _drawn_tree()
    found = _error_classes()
    assert set(found) == set(drawn) | {"HarnessRLError"}, (set(found) ^ set(drawn))
    for name, (parent, file) in drawn.items():
        bases, where = found[name]
        assert parent in bases, f"{name} ({where}) must derive from {parent}, has {bases}"
        assert where == file, f"{name} is defined in {where}, the docstring says {file}"


def test_errors_keep_their_standard_bases_and_names():
    from harnessrl.engine.base import EngineError, PromptTooLong
    from harnessrl.config import ConfigError
    from harnessrl.run.errors import TrainError
    from harnessrl.sandbox.base import SandboxError, SandboxUnavailable
    from harnessrl.tasks.model import TaskError
    from harnessrl.tree.run_trees import RunNotFound

    assert issubclass(ConfigError, ValueError) and issubclass(TaskError, ValueError)
    assert issubclass(TrainError, RuntimeError) and issubclass(SandboxUnavailable, SandboxError)
    assert issubclass(RunNotFound, FileNotFoundError)
    for cls in (ConfigError, TrainError, TaskError, SandboxUnavailable, PromptTooLong, EngineError, RunNotFound):
        assert issubclass(cls, HarnessRLError), cls
    try:
        raise TaskError("bad task")
    except HarnessRLError as err:
        assert str(err) == "bad task"
