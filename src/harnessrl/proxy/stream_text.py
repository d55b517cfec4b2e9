"""Sampled ids -> the reply's text as it grows: what a streamed answer may send before the call ends.

The served reply is `Renderer.parse(all ids)` (render/parsing.py): reasoning split off, tool calls
and shell blocks extracted, the text cut at the first stop string, the content stripped. A stream
may only send text that is certain to begin that final reply, so `ReplyStream` sends:

- reasoning: once, whole, when its `</think>` is sampled (nothing streams before that is decided);
- content: the decoded text up to the first tool-call start marker (`<tool_call>`, and a code fence
  when the tool format is bash) or stop string, without leading whitespace, holding back trailing
  whitespace, a trailing partial marker or stop string, and an incomplete UTF-8 character;
- nothing more once a marker or a stop string appeared: `rest(parsed)` gives the remainder at the
  end (the rest of the content; tool calls are sent whole by the protocol).

So the deltas concatenated are exactly the final content. Ids are decoded incrementally with the
tokenizers library's `DecodeStream` (prefix/read offsets, so a multi-byte character split over
tokens is sent once whole), or by decoding all ids again when the tokenizer has no fast backend or
post-processes its text (clean_up_tokenization_spaces).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from harnessrl.render.messages import ParsedCompletion, ToolSpec
from harnessrl.render.parsing import THINK_CLOSE, THINK_OPEN

if TYPE_CHECKING:
    from harnessrl.render.renderer import Renderer

log = logging.getLogger(__name__)

Channel = Literal["reasoning", "text"]
Delta = tuple[Channel, str]
TOOL_CALL_OPEN = "<tool_call>"
FENCE = "```"


def _held_suffix(text: str, needles: Sequence[str]) -> int:
    """Length of the longest end of `text` that is a proper prefix of one of `needles`."""
    best = 0
    for needle in needles:
        for n in range(min(len(needle) - 1, len(text)), best, -1):
            if text.endswith(needle[:n]):
                best = n
                break
    return best


class _Decoder:
    """The decoded text of the ids fed so far (complete characters only)."""

    def __init__(self, renderer: Renderer):
        tok = getattr(renderer, "tokenizer", None)
        backend = getattr(tok, "backend_tokenizer", None)
        self._stream: Any = None
        if backend is not None and not getattr(tok, "clean_up_tokenization_spaces", False):
            from tokenizers.decoders import DecodeStream  # noqa: PLC0415

            self._backend, self._stream = backend, DecodeStream(skip_special_tokens=False)
        self._decode: Callable[[list[int]], str] = renderer.decode
        self._ids: list[int] = []
        self.text = ""

    def feed(self, ids: Sequence[int]) -> None:
        if self._stream is None:
            self._ids.extend(ids)
            self.text = self._decode(self._ids).rstrip("\ufffd")
            return
        for token in ids:
            piece = self._stream.step(self._backend, int(token))
            if piece is not None:
                self.text += piece


class ReplyStream:
    """Feed sampled ids as they come (`feed` -> deltas to send); `rest(parsed)` at the end."""

    def __init__(self, renderer: Renderer, tools: list[ToolSpec], stop: Sequence[str]):
        self._decoder = _Decoder(renderer)
        self._stop_ids = frozenset(getattr(renderer, "stop_ids", ()) or ())
        self._think_opened = bool(getattr(renderer, "think_opened", False))
        info = getattr(renderer, "info", None)
        shell = info.shell_tool(tools) if info is not None else None
        self._markers = (TOOL_CALL_OPEN, FENCE) if shell is not None else (TOOL_CALL_OPEN,)
        self._stops = tuple(s for s in stop if s)
        self._pending_stop: int | None = None  # a stop id is not text when it is the last id
        self._reasoning: str | None = None  # the reasoning sent ("" when there is none); None: undecided
        self._sent = ""  # the content sent so far
        self._closed = False  # a marker or stop string appeared: the rest waits for the end

    def feed(self, ids: Sequence[int]) -> list[Delta]:
        if self._closed or not ids:
            return []
        new = list(ids)
        if self._pending_stop is not None:
            new.insert(0, self._pending_stop)
            self._pending_stop = None
        if new[-1] in self._stop_ids:
            self._pending_stop = new.pop()
        self._decoder.feed(new)
        return self._advance(self._decoder.text)

    def rest(self, parsed: ParsedCompletion) -> list[Delta]:
        """What is left to send of the final reply (its reasoning when not sent, the content's rest)."""
        out: list[Delta] = []
        if self._reasoning is None and parsed.reasoning:
            out.append(("reasoning", parsed.reasoning))
        if not parsed.content.startswith(self._sent):  # a tokenizer whose decode is not prefix-stable
            log.warning("streamed text is not a prefix of the parsed reply; the stream's text differs")
            return out
        if len(parsed.content) > len(self._sent):
            out.append(("text", parsed.content[len(self._sent):]))
        return out

    def _advance(self, text: str) -> list[Delta]:
        out: list[Delta] = []
        text, final = self._cut(text, self._stops)
        body = self._reasoning_body(text)
        if body is not None:
            if THINK_CLOSE not in body:  # the reasoning is not complete: nothing is sent yet
                self._closed = final
                return out
            reasoning, text = body.split(THINK_CLOSE, 1)
            if self._reasoning is None:
                self._reasoning = reasoning.strip("\n")
                if self._reasoning:
                    out.append(("reasoning", self._reasoning))
        self._reasoning = "" if self._reasoning is None else self._reasoning
        text, marked = self._cut(text, self._markers)
        self._closed = final or marked
        content = text.strip()
        if content.startswith(self._sent) and len(content) > len(self._sent):
            out.append(("text", content[len(self._sent):]))
            self._sent = content
        return out

    def _reasoning_body(self, text: str) -> str | None:
        """The text after `<think>` (the whole text when the prompt opened it), None when the reply
        has no reasoning; "" (no `</think>` yet) while the text may still open it."""
        if self._think_opened:
            return text
        stripped = text.lstrip()
        if stripped.startswith(THINK_OPEN):
            return stripped[len(THINK_OPEN):]
        return "" if THINK_OPEN.startswith(stripped) else None

    @staticmethod
    def _cut(text: str, needles: Sequence[str]) -> tuple[str, bool]:
        """`text` before the first of `needles` (True: one occurs), else without a trailing partial one."""
        at = min((i for i in (text.find(n) for n in needles) if i >= 0), default=-1)
        if at >= 0:
            return text[:at], True
        return text[:len(text) - _held_suffix(text, needles)], False
