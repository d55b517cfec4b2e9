"""Protocol-neutral conversation types: the contract between the proxy's protocol adapters and the renderer.

The proxy turns an OpenAI Chat / Anthropic Messages / OpenAI Responses request into a list of
`Message` + `ToolSpec`; the renderer turns those into prompt ids, and sampled ids back into a
`ParsedCompletion` that the proxy serialises in the caller's protocol.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["system", "user", "assistant", "tool"]


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: Any  # parsed JSON (usually a dict) for function tools; a raw string for custom tools
    kind: Literal["function", "custom"] = "function"


@dataclass
class Message:
    role: Role
    content: str = ""  # text; block lists are joined by the protocol adapter
    reasoning: str | None = None  # thinking / reasoning text of an assistant turn
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None  # for role == "tool"
    name: str | None = None  # tool name for role == "tool" when the protocol gives it
    meta: dict[str, Any] = field(default_factory=dict)  # e.g. thinking signature, is_error


@dataclass
class ToolSpec:
    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=dict)  # JSON schema
    kind: Literal["function", "custom"] = "function"


@dataclass
class ParsedCompletion:
    content: str
    reasoning: str | None
    tool_calls: list[ToolCall]
    finish_reason: Literal["stop", "length", "tool_calls"]
