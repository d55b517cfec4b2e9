"""The records of exact history: a prepared prompt, and a served turn.

A turn that extends an earlier one stores only its own suffix and a reference to that turn
(``base``); its full prompt ids are assembled on demand. With the message and key lists sharing
the base's objects, a rollout's memory grows with its new text, not with turns x history.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harnessrl.render.messages import Message, ParsedCompletion, ToolSpec
from harnessrl.render.normalize import MessageKey


@dataclass
class RenderedPrompt:
    """What `Conversation.prepare` returns: the ids to send to the engine, and how they were made."""

    ids: list[int]
    provenance: list[int]  # PROMPT, or the policy version that sampled the token
    parent_turn: int | None  # the turn whose reply this request continues (by meaning)
    new_tokens: int  # ids not reused from the parent turn's prompt + sampled ids
    mode: str  # "exact" | "rerender"
    tokenized: int = 0  # ids produced by the tokenizer during this prepare (the rest came from caches)
    incremental: bool = False  # the tail was rendered behind a stub prefix, not from the full history
    retry_of: int | None = None  # the turn this request repeats unchanged
    base_turn: int | None = None  # ids = that turn's prompt + sampled ids + ids[suffix_start:]
    suffix_start: int = 0
    messages: list[Message] = field(default_factory=list, repr=False)
    tools: list[ToolSpec] = field(default_factory=list, repr=False)
    keys: list[MessageKey] = field(default_factory=list, repr=False)
    tools_key: str = field(default="", repr=False)

    def summary(self) -> dict[str, object]:
        """How the prompt was made, for the call record's meta."""
        return {"render_mode": self.mode, "parent_turn": self.parent_turn, "new_tokens": self.new_tokens,
                "tokenized": self.tokenized, "incremental": self.incremental, "retry_of": self.retry_of,
                "reused_tokens": len(self.ids) - self.new_tokens}


@dataclass
class Turn:
    """One served call: what was asked, the ids the engine saw, what it sampled, what we replied."""

    index: int
    messages: list[Message]
    tools: list[ToolSpec]
    keys: list[MessageKey]
    tools_key: str
    base: "Turn | None"  # the turn whose prompt + sampled ids this prompt starts with
    suffix_ids: list[int]
    suffix_provenance: list[int]
    sampled_ids: list[int]
    reply: Message
    reply_key: MessageKey
    parsed: ParsedCompletion
    policy_version: int
    parent_turn: int | None
    mode: str

    def _chain(self) -> list["Turn"]:
        chain: list[Turn] = []
        turn: Turn | None = self
        while turn is not None:
            chain.append(turn)
            turn = turn.base
        chain.reverse()
        return chain

    @property
    def prompt_ids(self) -> list[int]:
        ids: list[int] = []
        for i, turn in enumerate(self._chain()):
            if i:
                ids += turn.base.sampled_ids  # type: ignore[union-attr]
            ids += turn.suffix_ids
        return ids

    @property
    def provenance(self) -> list[int]:
        prov: list[int] = []
        for i, turn in enumerate(self._chain()):
            if i:
                base = turn.base
                prov += [base.policy_version] * len(base.sampled_ids)  # type: ignore[union-attr]
            prov += turn.suffix_provenance
        return prov
