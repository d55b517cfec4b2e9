"""The action format: how a harness's model writes each action.

- ``bash``: as text, one fenced ```bash block per reply, which the harness runs (fits small models);
- ``tools``: as the API's native tool calls (the harness's own tools).

One name set for the builtin agent's ``--format`` (harness/builtin_agent.py: a standalone script,
so it keeps its own copy of the names, checked against these by its tests) and mini-swe-agent's
``format`` option and profiles. ``bash`` is the word render.tool_format uses for the same
convention (one ```bash block per reply, there driving the harness's own shell tool); ``text`` (its
older name here) is accepted with a FutureWarning, ``tool`` (mini-swe-agent's older spelling) for
``tools``.

Not render.tool_format itself: that is how the proxy writes the tools a harness sends into the
prompt (hermes, smollm2, bash, ...), whichever action format the harness uses.
"""

from __future__ import annotations

import warnings
from typing import Literal, get_args

from harnessrl.harness.base import HarnessConfigError

ActionFormat = Literal["bash", "tools"]
ACTION_FORMATS: tuple[ActionFormat, ...] = get_args(ActionFormat)
ALIASES: dict[str, ActionFormat] = {"tool": "tools", "text": "bash"}  # older spellings, still accepted
RENAMED = {"text": "bash"}  # older names said with a FutureWarning


def action_format(value: str, harness: str) -> ActionFormat:
    """`value` as an ActionFormat (an alias resolved); HarnessConfigError naming the choices."""
    name = ALIASES.get(value, value)
    if value in RENAMED:
        warnings.warn(f"{harness} action format {value!r} is now {RENAMED[value]!r} (one ```bash block per reply, "
                      "the word render.tool_format uses); please rename it", FutureWarning, stacklevel=2)
    for fmt in ACTION_FORMATS:
        if fmt == name:
            return fmt
    raise HarnessConfigError(f"{harness} action format must be one of {', '.join(ACTION_FORMATS)}, got {value!r}")
