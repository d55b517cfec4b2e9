"""Load a Python file that is not an importable module (a benchmark script, a worker, a driver)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType


def load_file(name: str, path: Path | str) -> ModuleType:
    """The module `name` executed from `path` (not added to sys.modules)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
