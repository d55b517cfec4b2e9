"""Harness adapters: drive real, unmodified agent harnesses against the proxy inside a sandbox.

`make_harness(spec)` builds one adapter from a spec string:
  builtin | mini-swe-agent[:text|:tool] | claude-code | codex | openclaw[:lean|:gateway] | command:<template>
Adapters only write config files, set env vars and pass CLI flags (black box).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harnessrl.harness.base import HarnessAdapter, HarnessConfigError, HarnessResult

__all__ = ["HARNESS_SPECS", "HarnessAdapter", "HarnessConfigError", "HarnessResult", "make_harness"]

HARNESS_SPECS = ("builtin", "mini-swe-agent", "claude-code", "codex", "openclaw", "command:<template>")


def make_harness(spec: str, cache: Path | None = None, **options: Any) -> HarnessAdapter:
    """Build the adapter named by `spec`; `options` go to its constructor (e.g. mode="tool")."""
    name, _, arg = spec.strip().partition(":")
    if name == "command":
        from harnessrl.harness.command import CommandAdapter

        return CommandAdapter(arg, **options)
    if name == "builtin" and not arg:
        from harnessrl.harness.builtin import BuiltinAdapter

        return BuiltinAdapter(**options)
    if name == "mini-swe-agent":
        from harnessrl.harness.mini_swe_agent import MiniSweAgentAdapter

        mode = options.pop("mode", "text")
        return MiniSweAgentAdapter(mode=arg or mode, **options)
    if name == "claude-code" and not arg:
        from harnessrl.harness.claude_code import ClaudeCodeAdapter

        return ClaudeCodeAdapter(cache=cache, **options)
    if name == "codex" and not arg:
        from harnessrl.harness.codex import CodexAdapter

        return CodexAdapter(cache=cache, **options)
    if name == "openclaw" and arg in ("", "lean", "exec", "gateway"):
        from harnessrl.harness.openclaw import OpenClawAdapter

        lean = bool(options.pop("lean", False)) or arg == "lean"
        mode = "gateway" if arg == "gateway" else options.pop("mode", "exec")
        return OpenClawAdapter(cache=cache, lean=lean, mode=mode, **options)
    raise HarnessConfigError(f"unknown harness {spec!r}; use one of: {', '.join(HARNESS_SPECS)}")
