"""The wire protocols the proxy serves (see wire.py), and which one a request outside a model-call
route (models list, admin, unknown routes, framing errors) should get its errors in."""

from __future__ import annotations

from collections.abc import Mapping

from harnessrl.proxy.anthropic import AnthropicMessages
from harnessrl.proxy.gemini import GeminiGenerateContent
from harnessrl.proxy.openai_chat import InProcessChat, OpenAIChat
from harnessrl.proxy.openai_responses import OpenAIResponses
from harnessrl.proxy.wire import WireProtocol

ANTHROPIC = AnthropicMessages()
OPENAI_CHAT = OpenAIChat()
OPENAI_RESPONSES = OpenAIResponses()
GEMINI = GeminiGenerateContent()
WIRE_PROTOCOLS: tuple[WireProtocol, ...] = (ANTHROPIC, OPENAI_CHAT, OPENAI_RESPONSES, GEMINI)
IN_PROCESS = InProcessChat()  # ProxyServer.call: no route of its own


def protocol_for(path: str, headers: Mapping[str, str] | None = None) -> WireProtocol:
    """The protocol whose error shape a client on `path` expects: the one owning the route (or a
    route it starts), else Anthropic when the client sent `anthropic-version`, Gemini when it sent
    `x-goog-api-key`, else OpenAI Chat."""
    for wire in WIRE_PROTOCOLS:
        if wire.owns(path):
            return wire
    if headers is not None and "anthropic-version" in headers:
        return ANTHROPIC
    if headers is not None and "x-goog-api-key" in headers:
        return GEMINI
    return OPENAI_CHAT
