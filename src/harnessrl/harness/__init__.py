"""Harness adapters: drive real, unmodified agent harnesses against the proxy inside a sandbox.

`make_harness(spec)` builds one adapter from a spec string: `<harness>[:<profile>]`, a name of
ADAPTERS (`harness_profiles(name)` lists its profiles), or `command[<options>]:<template>` for any
other CLI agent (harness/command.py). `whitebox` is builtin's agent loop run in the run process
(harness/whitebox.py). A profile picks the harness's tool set and prompt (flags and config files
only: black box); see profiles.py and each adapter's PROFILES. Every adapter subclasses
HarnessAdapter (base.py), which holds the defaults of its optional capabilities.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import MappingProxyType
from typing import Any

from harnessrl.harness.base import CachedInstallAdapter, HarnessAdapter, HarnessConfigError, HarnessResult

__all__ = ["ADAPTERS", "COMMAND_SPEC", "HARNESS_NAMES", "HarnessAdapter", "HarnessConfigError", "HarnessResult",
           "adapter_class", "check_harnesses", "check_options", "harness_profiles", "harness_specs", "is_command",
           "make_harness", "spec_profile", "start_hint"]

# The harnesses by name: `module:Class` of each adapter, imported when first made. The one list of
# harness names: CLI choices, spec help, docs checks and tests derive from it.
ADAPTERS = MappingProxyType({
    "builtin": "harnessrl.harness.builtin:BuiltinAdapter",
    "mini-swe-agent": "harnessrl.harness.mini_swe_agent:MiniSweAgentAdapter",
    "claude-code": "harnessrl.harness.claude_code:ClaudeCodeAdapter",
    "codex": "harnessrl.harness.codex:CodexAdapter",
    "openclaw": "harnessrl.harness.openclaw:OpenClawAdapter",
    "qwen-code": "harnessrl.harness.qwen_code:QwenCodeAdapter",
    "opencode": "harnessrl.harness.opencode:OpencodeAdapter",
    "whitebox": "harnessrl.harness.whitebox:WhiteboxAdapter",
})
HARNESS_NAMES = tuple(ADAPTERS)
COMMAND_SPEC = "command[<options>]:<template>"  # any CLI agent (harness/command.py), not a name


def adapter_class(name: str) -> type[HarnessAdapter] | None:
    """The adapter class registered as `name` (None for an unknown name)."""
    target = ADAPTERS.get(name)
    if target is None:
        return None
    module, _, attr = target.partition(":")
    cls: type[HarnessAdapter] = getattr(importlib.import_module(module), attr)
    return cls


def harness_specs() -> tuple[str, ...]:
    """Every spec form, for help and error messages: `<name>[:profile]` for a harness with a choice
    of profiles, the bare name otherwise, then the `command` form."""
    forms = []
    for name in HARNESS_NAMES:
        cls = adapter_class(name)
        many = cls is not None and len({p.name for p in cls.profiles.values()}) > 1
        forms.append(f"{name}[:profile]" if many else name)
    return (*forms, COMMAND_SPEC)


def harness_profiles(name: str) -> list[str]:
    """The profile names a harness accepts (canonical names first, default first); [] if it has none."""
    cls = adapter_class(name)
    if cls is None:
        return []
    names = list(dict.fromkeys(p.name for p in cls.profiles.values()))
    return sorted(names, key=lambda n: n != cls.default_profile)


def make_harness(spec: str, cache: Path | None = None, **options: Any) -> HarnessAdapter:
    """Build the adapter named by `spec` (`<harness>[:<profile>]`, or `command:<template>`);
    `options` go to its constructor (e.g. extra_args=...)."""
    if is_command(spec):
        from harnessrl.harness.command import CommandAdapter, merge_options, split_command_spec

        spec_options, template = split_command_spec(spec)
        return CommandAdapter(template, **merge_options(spec_options, options))
    name, _, arg = spec.strip().partition(":")
    cls = adapter_class(name)
    if cls is None:
        raise HarnessConfigError(f"unknown harness {spec!r}; use one of: {', '.join(harness_specs())}")
    if arg:
        options["profile"] = arg
    if issubclass(cls, CachedInstallAdapter):  # installed into the harness cache
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
    cls = adapter_class(spec.strip().partition(":")[0])
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
        make_harness(spec, **options.get(spec, {})).check()


def start_hint(spec: str) -> str:
    """What to check when `spec` failed before its first model call. A `command:` harness is never
    installed by harnessrl, so `harnessrl harness install` would not apply to it: its fix is the
    sandbox's view of the CLI (`ro`) and one scripted try (`harnessrl harness check`)."""
    from harnessrl.harness.command import SHOW_IT_FIX
    from harnessrl.harness.install import INSTALLABLE

    if is_command(spec):
        return f"a command: harness is yours to install: {SHOW_IT_FIX}"
    name = spec.strip().partition(":")[0]
    if name in INSTALLABLE:
        return f"check the harness install (`harnessrl harness install {name}`)"
    return f"check the harness spec ({', '.join(harness_specs())})"


def spec_profile(spec: str) -> str:
    """The canonical profile name a spec runs with ("" for `command:` and unknown harnesses)."""
    try:
        adapter = make_harness(spec)
    except HarnessConfigError:
        return ""
    return adapter.profile.name if adapter.profile is not None else ""
