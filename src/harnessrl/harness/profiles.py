"""Named harness profiles: which tool set and prompt a harness runs with, as flags and config only.

A spec is `<harness>[:<profile>]` (e.g. `claude-code:small`); `command:<template>` takes no profile
(its colon belongs to the template). Every adapter ships `full` (the harness as shipped, its
default unless noted) and `small` (a tool set and prompt that fit an 8k context); some add more
(`tiny`, OpenClaw's `lean` and `gateway`, mini-swe-agent's `text`/`tool` modes). The resolved
profile (name + the settings it applies) is stored with every rollout.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harnessrl.harness.base import CachedInstallAdapter, HarnessConfigError


@dataclass(frozen=True)
class Profile:
    """One named way to run a harness. `settings` are adapter-specific knobs (flags, config keys);
    `aliases` are other names accepted for it (kept for older specs such as `mini-swe-agent:text`)."""

    name: str
    summary: str
    settings: dict[str, Any] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()

    def describe(self) -> dict[str, Any]:
        """What is stored with a rollout."""
        return {"name": self.name, "summary": self.summary, "settings": self.settings}


def profile_table(*profiles: Profile) -> dict[str, Profile]:
    """Name -> Profile, aliases included (each name or alias must be unique)."""
    table: dict[str, Profile] = {}
    for p in profiles:
        for key in (p.name, *p.aliases):
            if key in table:
                raise ValueError(f"duplicate profile name {key!r}")
            table[key] = p
    return table


def resolve(harness: str, table: Mapping[str, Profile], name: str | None, default: str) -> Profile:
    """The profile `name` (or the default) of `harness`, or a HarnessConfigError listing the choices."""
    key = name or default
    if key not in table:
        names = sorted({p.name for p in table.values()})
        raise HarnessConfigError(f"unknown profile {key!r} for harness {harness!r}; use one of: {', '.join(names)} "
                                 f"(e.g. --harness {harness}:{names[0]})")
    return table[key]


def split_spec(spec: str) -> tuple[str, str]:
    """`claude-code:small` -> ("claude-code", "small"); `claude-code` -> ("claude-code", "");
    `command:<template>` -> ("command", "<template>") (the rest is the template, colons and all)."""
    name, _, arg = spec.strip().partition(":")
    return name, arg


class ProfiledInstallAdapter(CachedInstallAdapter):
    """A cached-install harness driven through one of its `profiles` (flags and config files only),
    plus extra command-line arguments."""

    default_profile = "full"
    profile: Profile

    def __init__(self, cache: Path | None = None, extra_args: tuple[str, ...] = (), profile: str | None = None) -> None:
        self.cache = cache
        self.profile = resolve(self.name, self.profiles, profile, self.default_profile)
        self.extra_args = tuple(extra_args)
