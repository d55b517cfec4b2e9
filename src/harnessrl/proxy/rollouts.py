"""Per-rollout state behind the secret keys of `/r/<key>/v1/...`: the rollout id, its
Conversation (exact history for that rollout), its call sequence counter and its store usage.

Everything a key holds is freed when the key closes: the registry drops its state, and
`on_close(rollout_id)` lets the store forget the rollout's prefix base once no key of it is open.

Store usage (the byte quota, calls.py) belongs to the rollout id, not to a key: every open key of
a rollout shares one `QuotaUsage`, and the first key of a rollout loads it from the run store
(`usage(rollout_id)`), so neither a new key nor a restart of the proxy on the same run directory
gives a rollout a fresh quota."""

from __future__ import annotations

import secrets
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from harnessrl.proxy.replay import ReplayScript
    from harnessrl.render.conversation import Conversation

ADHOC = "adhoc"
ADHOC_MAX_TURNS = 2048  # the ad-hoc rollout never closes: past this many turns its history starts afresh


def new_key(nbytes: int = 18) -> str:
    """A fresh secret key (`nbytes` random bytes, URL-safe; rollout keys 144 bits). It starts with
    a letter: a harness handed the key as a command-line value (`--api-key KEY`) would read a
    leading "-" as an option (smolagents' argparse did)."""
    return "k" + secrets.token_urlsafe(nbytes)


@dataclass
class QuotaUsage:
    """What one rollout has spent of its store quota (shared by its open keys)."""

    stored_bytes: int = 0  # request + response bytes recorded for this rollout (the quota counts these)
    refused_over_quota: int = 0  # quota refusals; only the first is recorded


@dataclass
class RolloutState:
    key: str
    rollout_id: str
    conversation: Conversation  # (or a test double with prepare/commit)
    next_seq: int = 0
    usage: QuotaUsage = field(default_factory=QuotaUsage)
    inflight: int = 0  # calls of this key being served now
    large_inflight: int = 0  # of those, calls with a large body (app.py: max_large_inflight_per_key)
    off_loop: int = 0  # this key's renderings running in worker threads now (they hold its Conversation)
    max_calls: int | None = None  # model calls this key may make (None: no limit); later ones get a 400
    admitted: int = 0  # model calls admitted under max_calls
    replay: ReplayScript | None = None  # recorded answers to give first (a branch), or None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def take_seq(self) -> int:
        with self.lock:
            seq = self.next_seq
            self.next_seq += 1
            return seq

    def admit(self) -> bool:
        """Count one model call against `max_calls`; False once the budget is spent."""
        with self.lock:
            if self.max_calls is not None and self.admitted >= self.max_calls:
                return False
            self.admitted += 1
            return True


class RolloutRegistry:
    """Key -> RolloutState. Thread-safe: the runner registers from its own thread or over HTTP."""

    def __init__(self, new_conversation: Callable[[], Conversation], first_seq: Callable[[str], int],
                 on_close: Callable[[str], None] | None = None,
                 usage: Callable[[str], tuple[int, int]] | None = None):
        """`usage(rollout_id)` -> (bytes, quota refusals) the store already holds for a rollout."""
        self._new_conversation = new_conversation
        self._first_seq = first_seq
        self._on_close = on_close
        self._usage_of = usage or (lambda rollout_id: (0, 0))
        self._by_key: dict[str, RolloutState] = {}
        self._usage: dict[str, QuotaUsage] = {}  # rollout id -> usage, while a key of it is open
        self._lock = threading.Lock()
        self._adhoc: RolloutState | None = None

    def _load_usage(self, rollout_id: str) -> QuotaUsage:
        stored, refused = self._usage_of(rollout_id)
        return QuotaUsage(stored, refused)

    def register(self, rollout_id: str, key: str | None = None, max_calls: int | None = None,
                 replay: ReplayScript | None = None) -> str:
        """A fresh secret key for `rollout_id` (a rollout may hold several keys, e.g. after a retry);
        `max_calls`: the model calls the key may make; `replay`: a ReplayScript whose recorded
        answers the key's first calls get (proxy/replay.py)."""
        if not rollout_id or rollout_id == ADHOC:
            raise ValueError(f"invalid rollout id {rollout_id!r}")
        if max_calls is not None and max_calls < 1:
            raise ValueError(f"max_calls must be >= 1, got {max_calls}")
        key = key or new_key()
        state = RolloutState(key, rollout_id, self._new_conversation(), self._first_seq(rollout_id),
                             max_calls=max_calls, replay=replay)
        with self._lock:
            if key in self._by_key:
                raise ValueError("rollout key already registered")
            usage = self._usage.get(rollout_id)
        if usage is None:
            usage = self._load_usage(rollout_id)  # a store read: outside the lock
        with self._lock:
            if key in self._by_key:
                raise ValueError("rollout key already registered")
            state.usage = self._usage.setdefault(rollout_id, usage)  # a key registered meanwhile wins
            self._by_key[key] = state
        return key

    def close(self, key: str) -> bool:
        """Forget a key and free its state; later calls with it get 401. False when the key was unknown."""
        with self._lock:
            state = self._by_key.pop(key, None)
            last = state is not None and all(s.rollout_id != state.rollout_id for s in self._by_key.values())
            if state is not None and last:
                self._usage.pop(state.rollout_id, None)
        if state is not None and last and self._on_close is not None:
            self._on_close(state.rollout_id)
        return state is not None

    def __len__(self) -> int:
        return len(self._by_key)

    def get(self, key: str) -> RolloutState | None:
        return self._by_key.get(key)

    def adhoc(self) -> RolloutState:
        """The unnamed rollout of the plain `/v1/...` routes (created on first use). It never
        closes, so its memory is bounded instead: after `ADHOC_MAX_TURNS` turns its Conversation
        starts afresh (a conversation resent after that renders in full: correct ids, less reuse)."""
        with self._lock:
            if self._adhoc is None:
                self._adhoc = RolloutState("", ADHOC, self._new_conversation(), self._first_seq(ADHOC),
                                           self._load_usage(ADHOC))
            elif len(getattr(self._adhoc.conversation, "turns", ())) >= ADHOC_MAX_TURNS:
                self._adhoc.conversation = self._new_conversation()
            return self._adhoc

    def active(self) -> dict[str, str]:
        """key -> rollout id of every open rollout."""
        with self._lock:
            return {k: s.rollout_id for k, s in self._by_key.items()}
