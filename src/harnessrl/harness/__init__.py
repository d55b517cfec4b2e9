"""Harness adapters: drive real, unmodified agent harnesses against the proxy inside a sandbox.

`make_harness(spec)` builds one adapter from a spec string `<harness>[:<profile>]`:
  builtin | mini-swe-agent[:text|:tool] | claude-code[:full|:small|:tiny] | codex[:full|:small]
  | openclaw[:full|:small|:lean|:gateway|:gateway-small] | qwen-code[:full|:small] | opencode[:full|:small]
  | whitebox | command[<options>]:<template>
(`whitebox` is builtin's agent loop run in the run process, harness/whitebox.py)
A profile picks the harness's tool set and prompt (flags and config files only: black box);
see profiles.py and each adapter's PROFILES.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harnessrl.harness.base import HarnessAdapter, HarnessConfigError, HarnessResult
from harnessrl.harness.profiles import Profile

__all__ = ["HARNESS_SPECS", "HarnessAdapter", "HarnessConfigError", "HarnessResult", "check_harnesses",
           "check_options", "is_command", "make_harness", "harness_profiles", "spec_profile", "start_hint"]

HARNESS_SPECS = ("builtin", "mini-swe-agent[:profile]", "claude-code[:profile]", "codex[:profile]",
                 "openclaw[:profile]", "qwen-code[:profile]", "opencode[:profile]", "whitebox",
                 "command[<options>]:<template>")


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
    if name == "qwen-code":
        from harnessrl.harness.qwen_code import QwenCodeAdapter

        return QwenCodeAdapter
    if name == "opencode":
        from harnessrl.harness.opencode import OpencodeAdapter

        return OpencodeAdapter
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
    if is_command(spec):
        from harnessrl.harness.command import CommandAdapter, merge_options, split_command_spec

        spec_options, template = split_command_spec(spec)
        return CommandAdapter(template, **merge_options(spec_options, options))
    name, _, arg = spec.strip().partition(":")
    cls = _adapter_class(name)
    if cls is None:
        raise HarnessConfigError(f"unknown harness {spec!r}; use one of: {', '.join(HARNESS_SPECS)}")
    if arg:
        options["profile"] = arg
    if name in ("claude-code", "codex", "openclaw", "qwen-code", "opencode"):
        options["cache"] = cache
    return cls(**options)


def is_command(spec: str) -> bool:
    """`command:<template>` or `command[<options>]:<template>`."""
    return spec.strip().startswith(("command:", "command["))


def check_options(spec: str, options: dict[str, Any]) -> None:
    """HarnessConfigError when `options` (a run config's harnesses[].options) holds a key the
    harness does not take, naming the valid ones; paths are not looked at (see make_harness)."""
    import inspect

    if is_command(spec):
        from harnessrl.harness.command import merge_options, parse_options, split_command_spec

        if "name" in options:  # ids are planned from the spec alone (rollout/plan.py harness_tag)
            raise HarnessConfigError("a command harness's name goes in its spec, e.g. "
                                     f"name: 'command[name={options['name']}]:...', not in options")
        parse_options(merge_options(split_command_spec(spec)[0], options))
        return
    cls = _adapter_class(spec.strip().partition(":")[0])
    if cls is None or not options:
        return
    params = inspect.signature(cls.__init__).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    valid = [n for n in params if n not in ("self", "profile", "cache")]
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise HarnessConfigError(f"unknown option {unknown[0]!r} for harness {spec!r}; valid: {', '.join(valid) or 'none'}")


def check_harnesses(specs: list[str], options: dict[str, dict[str, Any]]) -> None:
    """Make each spec's adapter once (`options`: spec -> make_harness kwargs), so a bad option or a
    `command` harness's missing binary or path is a HarnessConfigError before any engine starts."""
    for spec in specs:
        adapter = make_harness(spec, **options.get(spec, {}))
        check = getattr(adapter, "check", None)
        if check is not None:
            check()


def start_hint(spec: str) -> str:
    """What to check when `spec` failed before its first model call. A `command:` harness is never
    installed by harnessrl, so `harnessrl harness install` would not apply to it: its fix is the
    sandbox's view of the CLI (`ro`) and one scripted try (`harnessrl harness check`)."""
    from harnessrl.harness.command import SHOW_IT_FIX
    from harnessrl.harness.install import HARNESS_NAMES

    if is_command(spec):
        return f"a command: harness is yours to install: {SHOW_IT_FIX}"
    name = spec.strip().partition(":")[0]
    if name in HARNESS_NAMES:
        return f"check the harness install (`harnessrl harness install {name}`)"
    return f"check the harness spec ({', '.join(HARNESS_SPECS)})"


def spec_profile(spec: str) -> str:
    """The canonical profile name a spec runs with ("" for `command:` and unknown harnesses)."""
    try:
        adapter = make_harness(spec)
    except HarnessConfigError:
        return ""
    profile = getattr(adapter, "profile", None)
    return profile.name if isinstance(profile, Profile) else ""
