"""Harness text is text: a special token written inside a message never becomes a control token.

The chat template writes its control tokens (``<|im_start|>``, ``<|im_end|>`` ...) around the
messages; a tokenizer that parses special tokens cannot tell those from the same strings written
by the harness (or by a tool's output, i.e. by the policy) inside a message. So before the
template runs, every special-token string in harness text (message content and reasoning, tool
call arguments, tool names, descriptions and schemas) is swapped for a placeholder, and the
renderer's encoder (Renderer.encode) tokenises placeholders back as the plain characters of the
token, with special-token parsing off for that text only; the template's own control tokens stay
real. Text without special-token strings is untouched: its ids are exactly what they were.

The placeholder is ASCII letters and digits (it survives json.dumps, jinja filters, trimming) and
holds a random nonce per renderer, so harness text cannot forge one.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import replace
from typing import Any, Iterable

from harnessrl.render.messages import Message, ToolCall, ToolSpec


class SpecialTextEscape:
    """Swap special-token strings in harness text for placeholders, and back."""

    def __init__(self, special_tokens: Iterable[str], nonce: str | None = None):
        toks = sorted({t for t in special_tokens if t}, key=len, reverse=True)
        self.prefix = f"HRLSPECIAL{nonce or secrets.token_hex(8)}N"
        self._placeholder = {t: f"{self.prefix}{i}Z" for i, t in enumerate(toks)}
        self._literal = {p: t for t, p in self._placeholder.items()}
        self._special = re.compile("|".join(re.escape(t) for t in toks)) if toks else None
        self._marked = re.compile(re.escape(self.prefix) + r"\d+Z")

    # -- escaping harness text -------------------------------------------------------------
    def text(self, text: str) -> str:
        if self._special is None or not text or self._special.search(text) is None:
            return text
        return self._special.sub(lambda m: self._placeholder[m.group()], text)

    def value(self, value: Any) -> Any:
        """A JSON-like value with every string (keys too) escaped."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(k) if isinstance(k, str) else k: self.value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v) for v in value]
        return value

    def messages(self, messages: list[Message]) -> list[Message]:
        if self._special is None:
            return messages
        return [self._message(m) for m in messages]

    def _message(self, m: Message) -> Message:
        calls = [ToolCall(c.id, self.text(c.name), self.value(c.arguments), c.kind) for c in m.tool_calls]
        return replace(m, content=self.text(m.content), reasoning=None if m.reasoning is None else self.text(m.reasoning),
                       tool_calls=calls, name=None if m.name is None else self.text(m.name))

    def tools(self, tools: list[ToolSpec]) -> list[ToolSpec]:
        if self._special is None:
            return tools
        return [replace(t, name=self.text(t.name), description=self.text(t.description),
                        parameters=self.value(t.parameters)) for t in tools]

    # -- encoding rendered text ---------------------------------------------------------------
    def marked(self, text: str) -> bool:
        """Does rendered text hold escaped harness text?"""
        return self.prefix in text

    def split(self, text: str) -> list[tuple[str, bool]]:
        """Rendered text as (piece, is_control_token) pieces: the template's special tokens on their
        own, the text between them with placeholders turned back into their literal strings."""
        assert self._special is not None
        out: list[tuple[str, bool]] = []
        pos = 0
        for m in self._special.finditer(text):
            if m.start() > pos:
                out.append((self.restore(text[pos:m.start()]), False))
            out.append((m.group(), True))
            pos = m.end()
        if pos < len(text):
            out.append((self.restore(text[pos:]), False))
        return out

    def restore(self, text: str) -> str:
        return self._marked.sub(lambda m: self._literal.get(m.group(), m.group()), text)
