"""The three wire protocols as one uniform interface for the call handler."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from harnessrl.proxy import anthropic, openai_chat, openai_responses
from harnessrl.proxy.canonical import CallResult, ChatRequest


@dataclass(frozen=True)
class Protocol:
    name: str  # stored in CallRecord.protocol
    family: str  # error shape: "anthropic" | "openai"
    parse: Callable[[Any], ChatRequest]
    respond: Callable[[CallResult, ChatRequest], dict[str, Any]]
    stream: Callable[[CallResult, ChatRequest], list[bytes]]


ANTHROPIC = Protocol(
    anthropic.PROTOCOL, anthropic.FAMILY, anthropic.parse,
    lambda result, req: anthropic.response_body(result),
    lambda result, req: anthropic.stream_events(result),
)
OPENAI_CHAT = Protocol(
    openai_chat.PROTOCOL, openai_chat.FAMILY, openai_chat.parse,
    lambda result, req: openai_chat.response_body(result),
    lambda result, req: openai_chat.stream_events(result, req.include_usage),
)
OPENAI_RESPONSES = Protocol(
    openai_responses.PROTOCOL, openai_responses.FAMILY, openai_responses.parse,
    openai_responses.response_body, openai_responses.stream_events,
)
