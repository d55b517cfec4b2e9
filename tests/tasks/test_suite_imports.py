"""The suite package's names survive importing all of its modules: a submodule named like a function
of the package (suite/wording.py vs a `wording()` helper) replaced the function on import, and every
builtin selector then failed with "'module' object is not callable"."""

from __future__ import annotations

import importlib
import pkgutil

import harnessrl.tasks.suite as suite
from harnessrl.tasks.loader import load_tasks


def test_builtin_tasks_load_after_every_suite_module_is_imported():
    for mod in pkgutil.iter_modules(suite.__path__):
        importlib.import_module(f"{suite.__name__}.{mod.name}")
    callables = {name for name in dir(suite) if callable(getattr(suite, name)) and not name.startswith("_")}
    shadowed = {m.name for m in pkgutil.iter_modules(suite.__path__)} & callables
    assert not shadowed, f"suite functions named like its modules: {sorted(shadowed)}"
    assert len(load_tasks("builtin:all")) > 0
    assert {t.family for t in load_tasks("builtin:write_word:test")} == {"write_word"}
