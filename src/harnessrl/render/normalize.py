"""Meaning-equality of messages and tool lists, as harnesses resend them.

Harnesses resend earlier turns equal in meaning but not byte-identical (docs/harnesses.md): JSON
re-serialised with other key orders and spacing, block lists joined into strings, cache_control
moved, tool-call ids stripped of non-alphanumerics, content null instead of "", thinking replayed
or dropped. A message's *key* keeps only what a chat template renders, in canonical form:

- text: None == "", whitespace runs collapsed, ends stripped;
- tool-call arguments: parsed JSON re-dumped with sorted keys (strings that are not JSON: text rule);
- tool-call ids and tool_call_id: ignored (no supported template renders them; harnesses rewrite them);
- meta (cache_control, signatures, is_error) and a tool message's name: ignored;
- reasoning: compared separately (`reply_matches`) since many clients drop it on resend;
- tools: order-insensitive set of (name, kind, description text, canonical schema).
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from harnessrl.render.errors import RenderInputError
from harnessrl.render.messages import Message, ToolCall, ToolSpec
from harnessrl.render.parsing import split_reasoning


def norm_text(text: str | None) -> str:
    """Whitespace-insensitive text form: runs of whitespace -> one space, ends stripped."""
    if not text:
        return ""
    return " ".join(text.split())


def canon_json(value: Any) -> str:
    """Canonical JSON: sorted keys, compact separators, unicode kept."""
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise RenderInputError(f"not JSON-serialisable: {exc}") from None


def norm_arguments(args: Any) -> str:
    """Tool-call arguments in canonical form, whether given parsed or as a JSON string."""
    if isinstance(args, str):
        try:
            return canon_json(json.loads(args))
        except ValueError:
            return "text:" + norm_text(args)
    return canon_json(args)


def call_key(call: ToolCall) -> tuple[str, str]:
    return (call.name, norm_arguments(call.arguments))


@dataclass(frozen=True)
class MessageKey:
    """What of a message counts for meaning. Equal keys (and compatible reasoning) = same meaning."""

    role: str
    text: str
    calls: tuple[tuple[str, str], ...] = ()
    reasoning: str = ""  # normalised; "" = none given

    def core(self) -> tuple[str, str, tuple[tuple[str, str], ...]]:
        return (self.role, self.text, self.calls)


def _check(msg: Message) -> None:
    if not isinstance(msg.content, (str, type(None))):
        raise RenderInputError(f"{msg.role} message content must be text, got {type(msg.content).__name__}")
    if not isinstance(msg.reasoning, (str, type(None))):
        raise RenderInputError(f"{msg.role} message reasoning must be text, got {type(msg.reasoning).__name__}")
    for call in msg.tool_calls:
        if not isinstance(call.name, str) or not call.name:
            raise RenderInputError("every tool call needs a non-empty string name")


def message_key(msg: Message) -> MessageKey:
    """The meaning key of one message (raises RenderInputError for a malformed message)."""
    _check(msg)
    content = msg.content or ""
    reasoning = msg.reasoning
    if msg.role == "assistant" and not reasoning:
        inline, rest = split_reasoning(content)
        if inline is not None:  # thinking served inline in content and sent back that way
            reasoning, content = inline, rest
    return MessageKey(
        role=msg.role,
        text=norm_text(content),
        calls=tuple(call_key(c) for c in msg.tool_calls),
        reasoning=norm_text(reasoning),
    )


def reply_matches(ours: MessageKey, theirs: MessageKey) -> bool:
    """Is ``theirs`` (resent by the harness) our reply ``ours``? Dropped reasoning still matches."""
    if ours.core() != theirs.core():
        return False
    return not theirs.reasoning or theirs.reasoning == ours.reasoning


def history_matches(stored: list[MessageKey], new: list[MessageKey]) -> bool:
    """Do the first ``len(stored)`` messages of ``new`` mean ``stored``? Assistant reasoning is lenient."""
    if len(new) < len(stored):
        return False
    head = new[: len(stored)]
    if head == stored:
        return True
    return all(s.core() == n.core() and (not s.reasoning or not n.reasoning or s.reasoning == n.reasoning)
               for s, n in zip(stored, head))


def tools_key(tools: list[ToolSpec]) -> str:
    """Order-insensitive canonical form of a tool list."""
    items = sorted(
        canon_json([t.name, t.kind, norm_text(t.description), canon_json(t.parameters or {})]) for t in tools
    )
    return "\n".join(items)


class KeyCache:
    """Memo of `message_key` / `tools_key` for one conversation, keyed by the raw fields they read.

    Harnesses resend the whole history every call, so without it every call re-normalises every
    earlier message (whitespace folding of a 44 KB system prompt, JSON canonicalisation of every
    tool call). The memo key is the raw text itself (hashing is C speed) and ``repr`` of parsed
    arguments / schemas: equal raw fields give equal keys, so a hit is always right; a harness that
    re-serialises differently only misses and pays the normalisation again. Bounded LRU.
    """

    def __init__(self, max_entries: int = 4096):
        self._messages: OrderedDict[tuple, MessageKey] = OrderedDict()
        self._tools: OrderedDict[tuple, str] = OrderedDict()
        self._max = max_entries
        self.hits = 0
        self.misses = 0

    def message(self, msg: Message) -> MessageKey:
        raw = _raw_message(msg)
        if raw is None:  # unhashable / malformed: the plain path (raises RenderInputError if bad)
            return message_key(msg)
        return self._get(self._messages, raw, lambda: message_key(msg))

    def messages(self, msgs: list[Message]) -> list[MessageKey]:
        return [self.message(m) for m in msgs]

    def tools(self, tools: list[ToolSpec]) -> str:
        try:
            raw = tuple((t.name, t.kind, t.description, repr(t.parameters)) for t in tools)
            hash(raw)
        except TypeError:
            return tools_key(tools)
        return self._get(self._tools, raw, lambda: tools_key(tools))

    def _get(self, memo: OrderedDict, raw: tuple, compute: Any) -> Any:
        hit = memo.get(raw)
        if hit is not None:
            memo.move_to_end(raw)
            self.hits += 1
            return hit
        self.misses += 1
        value = compute()
        memo[raw] = value
        if len(memo) > self._max:
            memo.popitem(last=False)
        return value


def _raw_message(msg: Message) -> tuple | None:
    """The fields `message_key` reads, as a hashable tuple (None when they are not plain values)."""
    if not isinstance(msg.content, (str, type(None))) or not isinstance(msg.reasoning, (str, type(None))):
        return None
    calls = []
    for c in msg.tool_calls:
        args = c.arguments if isinstance(c.arguments, str) else (type(c.arguments).__name__, repr(c.arguments))
        calls.append((c.name, args))
    raw = (msg.role, msg.content, msg.reasoning, tuple(calls))
    try:
        hash(raw)
    except TypeError:
        return None
    return raw


# Text a harness changes between two runs of the same task while meaning the same thing: ids and
# clocks. Replayed branches (proxy/replay.py) compare prompts with these spans masked.
_VOLATILE = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"  # UUIDs
    r"|\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?"  # ISO dates, times
    r"|\b\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?\b"  # clock times (ls -l, logs)
    r"|\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*,? (?:\w+ )?\d{1,2},? \d{4}\b"  # "Wed Dec 2 2026"
    r"|\b(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]* +\d{1,2}\b"  # "Dec  2" (ls -l)
    r"|\b(?=[0-9a-zA-Z_-]*\d)(?=[0-9a-zA-Z_-]*[a-zA-Z])[0-9a-zA-Z_-]{20,}\b"  # long mixed ids, keys
    r"|\b[0-9a-f]{12,}\b"  # hex ids
    r"|\b\d{9,}\b")  # epoch seconds / milliseconds, pids of long runs


def mask_volatile(text: str) -> str:
    """`text` with ids and clock readings replaced by one placeholder and whitespace folded
    (norm_text): two renders of the same harness turn that differ only in a session id, a tool-call
    id, a date or an `ls -l` time compare equal."""
    return norm_text(_VOLATILE.sub("\x00", text))
