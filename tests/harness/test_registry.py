"""The harness registry: every adapter is registered by name once, subclasses HarnessAdapter, and
takes its optional capabilities from the base class unless it overrides them."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

import harnessrl.harness as harness_pkg
from harnessrl.harness import (
    ADAPTERS,
    COMMAND_SPEC,
    HARNESS_NAMES,
    HarnessAdapter,
    HarnessConfigError,
    adapter_class,
    harness_specs,
    make_harness,
)
from harnessrl.harness import install as inst
from harnessrl.harness.base import LaunchedAdapter
from harnessrl.harness.command import CommandAdapter

CAPABILITIES = ("ro_paths", "preflight", "check", "bind_proxy", "describe")


def _adapter_classes() -> set[type]:
    """Every concrete HarnessAdapter subclass defined in the harness package's modules."""
    found: set[type] = set()
    for mod in pkgutil.iter_modules(harness_pkg.__path__):
        if mod.name in ("cli", "builtin_agent", "launcher", "openclaw_gateway", "openclaw_warm"):
            continue  # commands and in-sandbox scripts, not adapters
        module = importlib.import_module(f"harnessrl.harness.{mod.name}")
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, HarnessAdapter) and not inspect.isabstract(obj) and obj.__module__ == module.__name__:
                found.add(obj)
    return found


def test_the_registry_lists_every_adapter_once():
    registered = {adapter_class(name) for name in HARNESS_NAMES}
    concrete = _adapter_classes()
    # every adapter class is registered under its own name, except the `command:` form
    assert concrete - registered == {CommandAdapter}
    assert None not in registered and len(registered) == len(HARNESS_NAMES) == len(ADAPTERS)
    for name in HARNESS_NAMES:
        cls = adapter_class(name)
        assert cls is not None and cls.name == name
    assert adapter_class("nope") is None and adapter_class("command") is None


def test_specs_and_install_derive_from_the_registry():
    specs = harness_specs()
    assert specs[-1] == COMMAND_SPEC
    assert [s.partition("[")[0] for s in specs[:-1]] == list(HARNESS_NAMES)
    assert "builtin" in specs and "claude-code[:profile]" in specs  # one profile: no [:profile]
    # every installable package is a registered harness or one run as `command:` (cline)
    assert set(inst.INSTALLABLE) - set(HARNESS_NAMES) == {"cline"}
    with pytest.raises(HarnessConfigError, match="whitebox, command"):
        make_harness("nope")


@pytest.mark.parametrize("name", HARNESS_NAMES)
def test_each_adapters_capabilities_come_from_the_base_class(name):
    cls = adapter_class(name)
    assert cls is not None and issubclass(cls, HarnessAdapter)
    adapter = make_harness(name, cache=Path("/nonexistent-harness-cache"))
    for capability in CAPABILITIES:  # declared once on the base; an adapter may override
        assert hasattr(HarnessAdapter, capability)
        assert callable(getattr(adapter, capability))
    assert isinstance(cls.enforces_max_turns, bool)
    adapter.check()  # nothing to check for a named harness
    adapter.bind_proxy(object()) if name != "whitebox" else None
    assert adapter.profile is not None and adapter.describe()["name"] == adapter.profile.name
    assert adapter.default_profile in cls.profiles
    assert isinstance(adapter.ro_paths(), list)


def test_defaults_apply_to_an_adapter_that_declares_nothing():
    class Bare(HarnessAdapter):
        name = "bare"

        def run(self, sandbox, **kwargs):  # pragma: no cover - never run
            raise AssertionError

    bare = Bare()
    assert bare.ro_paths() == [] and bare.preflight() is None and bare.describe() == {}
    assert bare.check() is None and bare.bind_proxy(object()) is None
    assert bare.enforces_max_turns is True and bare.profile is None
    with pytest.raises(TypeError):
        HarnessAdapter()  # type: ignore[abstract]  # run is abstract


def test_only_overrides_differ_from_the_base():
    """The runner reads capabilities without probing: the ones an adapter does not override are the
    base class's own functions (no per-adapter copy of a default)."""
    overridden = {cls.name: {c for c in CAPABILITIES if getattr(cls, c) is not getattr(HarnessAdapter, c)}
                  for cls in _adapter_classes()}
    assert overridden["whitebox"] == {"bind_proxy"}
    assert "check" in overridden["command"] and "bind_proxy" not in overridden["claude-code"]
    assert all("describe" not in o for o in overridden.values())
    assert issubclass(CommandAdapter, LaunchedAdapter)


def test_one_harness_names():
    """HARNESS_NAMES (the adapters) is defined once; the installer's list has its own name."""
    from pathlib import Path

    src = Path(__file__).resolve().parents[2] / "src" / "harnessrl"
    defining = {p.relative_to(src).as_posix() for p in src.rglob("*.py") if "\nHARNESS_NAMES =" in p.read_text()}
    assert defining == {"harness/__init__.py"}
