"""Server-sent-event framing. Anthropic and Responses streams name each event; OpenAI Chat
streams send bare `data:` lines and end with `data: [DONE]`."""

from __future__ import annotations

from typing import Any

from harnessrl.proxy.jsonutil import dumps

DONE = b"data: [DONE]\n\n"


def event(name: str, data: Any) -> bytes:
    """One named event: `event: <name>` + one `data:` line of compact JSON."""
    return b"event: " + name.encode() + b"\ndata: " + dumps(data) + b"\n\n"


def data(payload: Any) -> bytes:
    """One unnamed event (OpenAI Chat chunk)."""
    return b"data: " + dumps(payload) + b"\n\n"
