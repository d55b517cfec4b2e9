"""Full rendering that keeps our own earlier replies as the exact ids that were sampled.

Used in exact mode when a request continues no earlier turn (compaction, an edited or dropped
message, OpenClaw's per-request context message that is not resent): every assistant message
that equals one of our replies by meaning is rendered as a marker, and the marker's span — up
to and including that reply's end-of-turn token — is replaced by the reply's sampled ids (+ the
end-of-turn token when the reply was cut by the length limit). The rest is template text,
tokenised through the conversation's chunk cache. Prompts of such a rollout therefore share
every token before the first changed message, and replies keep their policy-version provenance.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from harnessrl.render.messages import Message, ToolSpec
from harnessrl.render.normalize import MessageKey
from harnessrl.render.tokens import ChunkEncoder
from harnessrl.store.records import PROMPT

if TYPE_CHECKING:
    from harnessrl.render.renderer import Renderer


class ReplySource(Protocol):
    """What splicing needs of a served turn."""

    sampled_ids: list[int]
    policy_version: int
    reply_key: MessageKey


@dataclass
class Spliced:
    ids: list[int]
    provenance: list[int]
    tokenized: int
    replies: int  # how many replies were spliced in


def _marker(i: int) -> str:
    return f"\u2063HRLREPLY{i}\u2063"


def closing_ids(r: "Renderer", sampled: list[int]) -> list[int]:
    """End-of-turn ids to append after a reply that did not end with one (length limit)."""
    return [] if sampled and sampled[-1] == r.eot_id else list(r.eot_ids)


def with_markers(messages: list[Message], ours: Mapping[int, ReplySource]) -> tuple[list[Message], list[ReplySource]]:
    """Messages with our replies swapped for markers, and the replies in marker order."""
    swapped = list(messages)
    order = sorted(ours)
    for n, pos in enumerate(order):
        swapped[pos] = Message("assistant", _marker(n))
    return swapped, [ours[pos] for pos in order]


def splice_text(r: "Renderer", enc: ChunkEncoder, text: str, sources: list[ReplySource]) -> Spliced | None:
    """Tokenise rendered ``text``, replacing each marker..end-of-turn span by the reply's sampled ids."""
    ids: list[int] = []
    prov: list[int] = []
    fresh = 0
    pos = 0
    for n, src in enumerate(sources):
        at = text.find(_marker(n), pos)
        end = text.find(r.eot_text, at) if at >= 0 else -1
        if at < 0 or end < 0:
            return None
        piece, got = enc.encode(text[pos:at])
        close = closing_ids(r, src.sampled_ids)
        ids += piece + src.sampled_ids + close
        prov += [PROMPT] * len(piece) + [src.policy_version] * len(src.sampled_ids) + [PROMPT] * len(close)
        fresh += got
        pos = end + len(r.eot_text)
    piece, got = enc.encode(text[pos:])
    ids += piece
    prov += [PROMPT] * len(piece)
    return Spliced(ids, prov, fresh + got, len(sources))


def render_spliced(
    r: "Renderer",
    enc: ChunkEncoder,
    messages: list[Message],
    tools: list[ToolSpec],
    ours: Mapping[int, ReplySource],
) -> Spliced | None:
    """Render ``messages`` with the replies at positions ``ours`` spliced in; None if markers get lost."""
    swapped, sources = with_markers(messages, ours)
    return splice_text(r, enc, r.render_text(swapped, tools), sources)
