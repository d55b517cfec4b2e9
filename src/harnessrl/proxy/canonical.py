"""What every protocol adapter produces from a request and receives back to answer it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harnessrl.render.messages import Message, ParsedCompletion, ToolSpec


@dataclass
class ChatRequest:
    """A model call in protocol-neutral form (sampling fields are None when the client sent none)."""

    messages: list[Message]
    tools: list[ToolSpec]
    model: str
    stream: bool = False
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    stop: list[str] = field(default_factory=list)
    include_usage: bool = False  # OpenAI Chat stream_options.include_usage
    extra: dict[str, Any] = field(default_factory=dict)  # protocol-specific echo fields (tool_choice, ...)
    dropped: list[dict[str, str]] = field(default_factory=list)  # inputs the policy cannot see (wire.Dropped)


@dataclass
class CallResult:
    """A finished call: what the response body and SSE events are built from."""

    call_id: str
    model: str
    created: int  # unix seconds
    completion: ParsedCompletion
    prompt_tokens: int
    completion_tokens: int
    engine_finish: str  # "stop" | "length" as the engine reported it
