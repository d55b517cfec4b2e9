"""Harness adapters: drive real, unmodified agent harnesses against the proxy inside a sandbox.

`make_harness(spec)` builds one adapter from a spec string `<harness>[:<profile>]`:
  builtin | mini-swe-agent[:text|:tool] | claude-code[:full|:small|:tiny] | codex[:full|:small]
  | openclaw[:full|:small|:lean|:gateway|:gateway-small] | whitebox | command:<template>
(`whitebox` is builtin's agent loop run in the run process, harness/whitebox.py)
A profile picks the harness's tool set and prompt (flags and config files only: black box);
see profiles.py and each adapter's PROFILES.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harnessrl.harness.base import HarnessAdapter, HarnessConfigError, HarnessResult
from harnessrl.harness.profiles import Profile

__all__ = ["HARNESS_SPECS", "HarnessAdapter", "HarnessConfigError", "HarnessResult", "make_harness",
           "harness_profiles", "spec_profile"]

HARNESS_SPECS = ("builtin", "mini-swe-agent[:profile]", "claude-code[:profile]", "codex[:profile]",
                 "openclaw[:profile]", "whitebox", "command:<template>")


def _adapter_class(name: str) -> Any:
    if name == "builtin":
        from harnessrl.harness.builtin import BuiltinAdapter

        return BuiltinAdapter
    if name == "mini-swe-agent":
        from harnessrl.harness.mini_swe_agent import MiniSweAgentAdapter

        return MiniSweAgentAdapter
    if name == "claude-code":
        from harnessrl.harness.claude_code import ClaudeCodeAdapter

        return ClaudeCodeAdapter
    if name == "codex":
        from harnessrl.harness.codex import CodexAdapter

        return CodexAdapter
    if name == "openclaw":
        from harnessrl.harness.openclaw import OpenClawAdapter

        return OpenClawAdapter
    if name == "whitebox":
        from harnessrl.harness.whitebox import WhiteboxAdapter

        return WhiteboxAdapter
    return None


def harness_profiles(name: str) -> list[str]:
    """The profile names a harness accepts (canonical names first, default first); [] if it has none."""
    cls = _adapter_class(name)
    table = getattr(cls, "profiles", None) or {}
    names = list(dict.fromkeys(p.name for p in table.values()))
    default = getattr(cls, "default_profile", None)
    return sorted(names, key=lambda n: n != default)


def make_harness(spec: str, cache: Path | None = None, **options: Any) -> HarnessAdapter:
    """Build the adapter named by `spec` (`<harness>[:<profile>]`, or `command:<template>`);
    `options` go to its constructor (e.g. extra_args=...)."""
    name, _, arg = spec.strip().partition(":")
    if name == "command":
        from harnessrl.harness.command import CommandAdapter

        return CommandAdapter(arg, **options)
    cls = _adapter_class(name)
    if cls is None:
        raise HarnessConfigError(f"unknown harness {spec!r}; use one of: {', '.join(HARNESS_SPECS)}")
    if arg:
        options["profile"] = arg
    if name in ("claude-code", "codex", "openclaw"):
        options["cache"] = cache
    return cls(**options)


def spec_profile(spec: str) -> str:
    """The canonical profile name a spec runs with ("" for `command:` and unknown harnesses)."""
    try:
        adapter = make_harness(spec)
    except HarnessConfigError:
        return ""
    profile = getattr(adapter, "profile", None)
    return profile.name if isinstance(profile, Profile) else ""
