"""Exact history: one Conversation per rollout, held by the proxy.

    conv = Conversation(renderer, mode="exact")
    rendered = conv.prepare(messages, tools)           # -> RenderedPrompt (ids for the engine)
    gen = await engine.generate(rendered.ids, params)
    parsed = conv.commit(rendered, gen.token_ids, gen.policy_version, gen.finish_reason)

Mode "exact" (default):
- When the request resends an earlier turn's messages + that turn's reply (equal by meaning,
  see normalize.py) with the same tools, the prompt is that turn's prompt ids + its sampled ids
  (+ the end-of-turn token when the reply was cut by the length limit) + the incremental
  rendering of the rest. So call k+1's prompt extends call k's prompt + completion token for
  token, and reused sampled tokens keep their policy version as provenance.
- A request that repeats an earlier request (a retry) gets that request's ids again.
- Anything else (compaction, an edited or dropped message, a new system prompt, OpenClaw's
  per-request context message) is rendered in full — no false prefix — with each of our own
  replies still in it spliced in as its sampled ids (splice.py).

Mode "rerender": every prompt is the full rendering of the request as a plain deployment would
tokenise it (e.g. Qwen3 drops earlier thinking), through a chunk cache so the tokenizer's work per
turn follows the new text. The ids are what the engine saw, all with PROMPT provenance.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from harnessrl.render.incremental import tail_text
from harnessrl.render.messages import Message, ParsedCompletion, ToolSpec
from harnessrl.render.normalize import KeyCache, MessageKey, history_matches, message_key, reply_matches
from harnessrl.render.splice import closing_ids, render_spliced, splice_text, with_markers
from harnessrl.render.turns import RenderedPrompt, Turn
from harnessrl.store.records import PROMPT

if TYPE_CHECKING:
    from harnessrl.render.renderer import Renderer

MODES = ("exact", "rerender")
__all__ = ["MODES", "Conversation", "RenderedPrompt", "Turn"]


def _id_seed(prompt_ids: list[int], sampled_ids: list[int]) -> str:
    h = hashlib.sha1(str(len(prompt_ids)).encode())
    h.update(repr((prompt_ids[-64:], sampled_ids)).encode())
    return h.hexdigest()[:16]


def _common_prefix(a: list[int], b: list[int], block: int = 1024) -> int:
    """Length of the common prefix, comparing whole blocks at C speed first."""
    n = min(len(a), len(b))
    i = 0
    while i + block <= n and a[i : i + block] == b[i : i + block]:
        i += block
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
        self._keys = KeyCache()  # resent history is normalised once per conversation
        self._replies: dict[tuple, Turn] = {}  # reply meaning (without reasoning) -> latest turn
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
            if turn.tools_key == tkey and len(turn.keys) == len(keys) and history_matches(turn.keys, keys):
                return turn
        return None

    def our_replies(self, keys: list[MessageKey]) -> dict[int, Turn]:
        """Positions of assistant messages that are our own earlier replies (latest turn wins)."""
        found: dict[int, Turn] = {}
        for i, key in enumerate(keys):
            if key.role == "assistant":
                turn = self._replies.get(key.core())
                if turn is not None and reply_matches(turn.reply_key, key):
                    found[i] = turn
        return found

    # ---- the two calls the proxy makes ------------------------------------------------------
    def prepare(self, messages: list[Message], tools: list[ToolSpec] | None = None) -> RenderedPrompt:
        """Prompt ids (and provenance) for a request; nothing is recorded until `commit`."""
        tools = list(tools or [])
        messages = list(messages)
        with self._lock:
            keys = self._keys.messages(messages)
            tkey = self._keys.tools(tools)
            parent = self.find_parent(keys, tkey)
            out = None
            if self.mode == "exact":
                retry = self.find_retry(keys, tkey)
                if retry is not None:
                    out = self._repeat(retry)
                    messages, keys = retry.messages, retry.keys
                elif parent is not None:
                    out = self._extend(parent, messages, tools, keys)
                    if out is not None:  # share the parent's objects: memory grows with new text only
                        n = len(parent.keys)
                        messages = parent.messages + [parent.reply] + messages[n + 1 :]
                        keys = parent.keys + [parent.reply_key] + keys[n + 1 :]
            if out is None:
                out = self._full(messages, tools, parent, keys)
            self.tokenized_total += out.tokenized
        out.messages, out.tools, out.keys, out.tools_key = messages, tools, keys, tkey
        return out

    def commit(self, rendered: RenderedPrompt, sampled_ids: list[int], policy_version: int,
               finish_reason: str | None = None, stop: Sequence[str] = ()) -> ParsedCompletion:
        """Record the call's sampled ids and return the parsed reply to serve (its text ends
        before the first of the request's `stop` strings)."""
        sampled = list(sampled_ids)
        parsed = self.renderer.parse(sampled, finish_reason=finish_reason, tools=rendered.tools,
                                     id_seed=_id_seed(rendered.ids, sampled), stop=stop)
        reply = Message("assistant", parsed.content, reasoning=parsed.reasoning, tool_calls=list(parsed.tool_calls))
        with self._lock:
            base = self.turns[rendered.base_turn] if rendered.base_turn is not None else None
            start = rendered.suffix_start if base is not None else 0
            turn = Turn(
                index=len(self.turns), messages=rendered.messages, tools=rendered.tools, keys=rendered.keys,
                tools_key=rendered.tools_key, base=base, suffix_ids=list(rendered.ids[start:]),
                suffix_provenance=list(rendered.provenance[start:]), sampled_ids=sampled, reply=reply,
                reply_key=message_key(reply), parsed=parsed, policy_version=policy_version,
                parent_turn=rendered.parent_turn, mode=rendered.mode,
            )
            self.turns.append(turn)
            self._replies[turn.reply_key.core()] = turn
        return parsed

    # ---- rendering paths -----------------------------------------------------------------
    def _repeat(self, turn: Turn) -> RenderedPrompt:
        ids = turn.prompt_ids
        start = len(ids) - len(turn.suffix_ids)
        return RenderedPrompt(ids, turn.provenance, turn.parent_turn, 0, self.mode, retry_of=turn.index,
                              base_turn=turn.base.index if turn.base else None, suffix_start=start)

    def _extend(self, parent: Turn, messages: list[Message], tools: list[ToolSpec],
                keys: list[MessageKey]) -> RenderedPrompt | None:
        """Parent prompt + sampled ids + closing + incrementally rendered tail (None: cannot cut).

        Our own replies inside the tail (sub-agent branches, edits behind the parent) are spliced
        in as their sampled ids too.
        """
        r = self.renderer
        n = len(parent.keys)
        tail, sources = with_markers(messages[n + 1 :], self.our_replies(keys[n + 1 :]))
        text, incremental = tail_text(r, history=messages[:n], reply=parent.reply, tail=tail, tools=tools)
        spliced = splice_text(r, self._encoder, text, sources) if text is not None else None
        if spliced is None:
            return None
        closing = closing_ids(r, parent.sampled_ids)
        head = parent.prompt_ids + parent.sampled_ids
        ids = head + closing + spliced.ids
        prov = (parent.provenance + [parent.policy_version] * len(parent.sampled_ids)
                + [PROMPT] * len(closing) + spliced.provenance)
        return RenderedPrompt(ids, prov, parent.index, len(ids) - len(head), self.mode,
                              tokenized=spliced.tokenized, incremental=incremental,
                              base_turn=parent.index, suffix_start=len(head))

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
