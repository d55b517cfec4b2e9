"""Exact history: one Conversation per rollout, held by the proxy.

    conv = renderer.conversation(mode="exact")
    rendered = conv.prepare(messages, tools)           # -> RenderedPrompt (ids for the engine)
    gen = await engine.generate(rendered.ids, params)
    parsed = conv.commit(rendered, gen.token_ids, gen.policy_version, gen.finish_reason)

Mode "exact" (default): when the request resends an earlier turn's messages + that turn's reply
(equal by meaning, see normalize.py) with the same tools, the prompt is that turn's prompt ids +
its sampled ids (+ the end-of-turn token when the reply was cut by the length limit) + the
incremental rendering of the rest. So call k+1's prompt extends call k's prompt + completion
token for token, and reused sampled tokens keep their policy version as provenance.
A request that resends an earlier request unchanged (a retry) gets that request's ids again.
Anything else (compaction, edits, a new system prompt) is rendered in full: no false reuse.

Mode "rerender": every prompt is the full rendering of the request as a plain deployment would
tokenise it (e.g. Qwen3 drops earlier thinking), tokenised through a chunk cache so the cost per
turn follows the new text. The ids are what the engine saw, all with PROMPT provenance.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from harnessrl.render.incremental import tail_text
from harnessrl.render.messages import Message, ParsedCompletion, ToolSpec
from harnessrl.render.normalize import MessageKey, history_matches, message_key, reply_matches, tools_key
from harnessrl.render.splice import closing_ids, render_spliced, splice_text, with_markers
from harnessrl.store.records import PROMPT

if TYPE_CHECKING:
    from harnessrl.render.renderer import Renderer

MODES = ("exact", "rerender")


@dataclass
class RenderedPrompt:
    ids: list[int]
    provenance: list[int]  # PROMPT, or the policy version that sampled the token
    parent_turn: int | None  # the turn whose reply this request continues (by meaning)
    new_tokens: int  # ids not reused from the parent turn's prompt + sampled ids
    mode: str  # "exact" | "rerender"
    tokenized: int = 0  # ids produced by the tokenizer during this prepare (the rest came from caches)
    incremental: bool = False  # the tail was rendered behind a stub prefix, not from the full history
    retry_of: int | None = None  # the turn this request repeats unchanged
    messages: list[Message] = field(default_factory=list, repr=False)
    tools: list[ToolSpec] = field(default_factory=list, repr=False)
    keys: list[MessageKey] = field(default_factory=list, repr=False)
    tools_key: str = field(default="", repr=False)


@dataclass
class Turn:
    """One served call: what was asked, the ids the engine saw, what it sampled, what we replied."""

    index: int
    messages: list[Message]
    tools: list[ToolSpec]
    keys: list[MessageKey]
    tools_key: str
    prompt_ids: list[int]
    provenance: list[int]
    sampled_ids: list[int]
    reply: Message
    reply_key: MessageKey
    parsed: ParsedCompletion
    policy_version: int
    parent_turn: int | None
    mode: str


def _id_seed(prompt_ids: list[int], sampled_ids: list[int]) -> str:
    h = hashlib.sha1(str(len(prompt_ids)).encode())
    h.update(repr((prompt_ids[-64:], sampled_ids)).encode())
    return h.hexdigest()[:16]


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class Conversation:
    """The turns served so far in one rollout, and the rendering that reuses them."""

    def __init__(self, renderer: "Renderer", mode: str = "exact"):
        if mode not in MODES:
            raise ValueError(f"unknown render mode {mode!r}; choose one of {', '.join(MODES)}")
        self.renderer = renderer
        self.mode = mode
        self.turns: list[Turn] = []
        self.tokenized_total = 0
        self._encoder = renderer.chunk_encoder()
        self._lock = threading.Lock()

    # ---- lookups ------------------------------------------------------------------------
    def find_parent(self, keys: list[MessageKey], tkey: str) -> Turn | None:
        """The latest turn whose request + reply are the first messages of this request."""
        for turn in reversed(self.turns):
            n = len(turn.keys)
            if turn.tools_key != tkey or len(keys) <= n:
                continue
            if reply_matches(turn.reply_key, keys[n]) and history_matches(turn.keys, keys):
                return turn
        return None

    def find_retry(self, keys: list[MessageKey], tkey: str) -> Turn | None:
        """The latest turn whose request equals this one (a harness retry)."""
        for turn in reversed(self.turns):
            if turn.tools_key == tkey and turn.keys == keys:
                return turn
        return None

    # ---- the two calls the proxy makes ------------------------------------------------------
    def prepare(self, messages: list[Message], tools: list[ToolSpec] | None = None) -> RenderedPrompt:
        """Prompt ids (and provenance) for a request; nothing is recorded until `commit`."""
        tools = list(tools or [])
        keys = [message_key(m) for m in messages]
        tkey = tools_key(tools)
        with self._lock:
            parent = self.find_parent(keys, tkey)
            if self.mode == "exact":
                retry = self.find_retry(keys, tkey)
                if retry is not None:
                    out = RenderedPrompt(list(retry.prompt_ids), list(retry.provenance), retry.parent_turn, 0,
                                         self.mode, retry_of=retry.index)
                elif parent is not None:
                    out = self._extend(parent, messages, tools, keys) or self._full(messages, tools, parent, keys)
                else:
                    out = self._full(messages, tools, None, keys)
            else:
                out = self._full(messages, tools, parent, keys)
            self.tokenized_total += out.tokenized
        out.messages, out.tools, out.keys, out.tools_key = list(messages), tools, keys, tkey
        return out

    def commit(self, rendered: RenderedPrompt, sampled_ids: list[int], policy_version: int,
               finish_reason: str | None = None) -> ParsedCompletion:
        """Record the call's sampled ids and return the parsed reply to serve."""
        sampled = list(sampled_ids)
        parsed = self.renderer.parse(sampled, finish_reason=finish_reason, tools=rendered.tools,
                                     id_seed=_id_seed(rendered.ids, sampled))
        reply = Message("assistant", parsed.content, reasoning=parsed.reasoning, tool_calls=list(parsed.tool_calls))
        with self._lock:
            self.turns.append(Turn(
                index=len(self.turns), messages=rendered.messages, tools=rendered.tools, keys=rendered.keys,
                tools_key=rendered.tools_key, prompt_ids=list(rendered.ids), provenance=list(rendered.provenance),
                sampled_ids=sampled, reply=reply, reply_key=message_key(reply), parsed=parsed,
                policy_version=policy_version, parent_turn=rendered.parent_turn, mode=rendered.mode,
            ))
        return parsed

    # ---- rendering paths -----------------------------------------------------------------
    def _extend(self, parent: Turn, messages: list[Message], tools: list[ToolSpec],
                keys: list[MessageKey]) -> RenderedPrompt | None:
        """Parent prompt + sampled ids + closing + incrementally rendered tail (None: cannot cut).

        Our own replies inside the tail (sub-agent branches, edits behind the parent) are spliced
        in as their sampled ids too.
        """
        r = self.renderer
        n = len(parent.keys)
        ours = self.our_replies(keys[n + 1 :])
        tail, sources = with_markers(list(messages[n + 1 :]), ours)
        text, incremental = tail_text(r, history=list(messages[:n]), reply=parent.reply, tail=tail, tools=tools)
        if text is None:
            return None
        spliced = splice_text(r, self._encoder, text, sources)
        if spliced is None:
            return None
        closing = closing_ids(r, parent.sampled_ids)
        ids = parent.prompt_ids + parent.sampled_ids + closing + spliced.ids
        prov = (parent.provenance + [parent.policy_version] * len(parent.sampled_ids)
                + [PROMPT] * len(closing) + spliced.provenance)
        return RenderedPrompt(ids, prov, parent.index, len(closing) + len(spliced.ids), self.mode,
                              tokenized=spliced.tokenized, incremental=incremental)

    def our_replies(self, keys: list[MessageKey]) -> dict[int, Turn]:
        """Positions of assistant messages that are our own earlier replies (latest turn wins)."""
        by_core: dict[tuple, Turn] = {}
        for turn in self.turns:
            by_core[turn.reply_key.core()] = turn
        found: dict[int, Turn] = {}
        for i, key in enumerate(keys):
            if key.role == "assistant":
                turn = by_core.get(key.core())
                if turn is not None and reply_matches(turn.reply_key, key):
                    found[i] = turn
        return found

    def _full(self, messages: list[Message], tools: list[ToolSpec], parent: Turn | None,
              keys: list[MessageKey]) -> RenderedPrompt:
        """Full rendering through the chunk cache; in exact mode our replies are spliced in as sampled."""
        spliced = None
        if self.mode == "exact":
            ours = self.our_replies(keys)
            if ours:
                spliced = render_spliced(self.renderer, self._encoder, messages, tools, ours)
        if spliced is not None:
            ids, prov, fresh = spliced.ids, spliced.provenance, spliced.tokenized
        else:
            ids, fresh = self._encoder.encode(self.renderer.render_text(messages, tools))
            prov = [PROMPT] * len(ids)
        reused = 0
        if parent is not None:
            reused = _common_prefix(ids, parent.prompt_ids + parent.sampled_ids)
        return RenderedPrompt(ids, prov, parent.index if parent else None, len(ids) - reused,
                              self.mode, tokenized=fresh)
