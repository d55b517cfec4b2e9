"""The action format: how a harness's model writes each action.

- ``text``: as text, one fenced shell block per reply, which the harness runs (fits small models);
- ``tools``: as the API's native tool calls (the harness's own tools).

One name set for the builtin agent's ``--format`` (harness/builtin_agent.py: a standalone script,
so it keeps its own copy of the names, checked against these by its tests) and mini-swe-agent's
``format`` option and profiles. ``tool`` (mini-swe-agent's older spelling) is accepted for ``tools``.

Not render.tool_format: that is how the proxy writes the tools a harness sends into the prompt
(hermes, smollm2, bash, ...), whichever action format the harness uses.
"""

from __future__ import annotations

from typing import Literal, get_args

from harnessrl.harness.base import HarnessConfigError

ActionFormat = Literal["text", "tools"]
ACTION_FORMATS: tuple[ActionFormat, ...] = get_args(ActionFormat)
ALIASES: dict[str, ActionFormat] = {"tool": "tools"}  # older spellings, still accepted


def action_format(value: str, harness: str) -> ActionFormat:
    """`value` as an ActionFormat (an alias resolved); HarnessConfigError naming the choices."""
    name = ALIASES.get(value, value)
    for fmt in ACTION_FORMATS:
        if fmt == name:
            return fmt
    raise HarnessConfigError(f"{harness} action format must be one of {', '.join(ACTION_FORMATS)}, got {value!r}")
