"""Replay to branch: a rollout key that answers a harness's first calls with the answers a parent
rollout got, then samples fresh.

A harness is a black box, so the trainer cannot fork its loop at turn j. It can run the harness
again, on the same task in a fresh sandbox, and have the proxy answer its first j model calls with
the parent's recorded replies (the same sampled ids, logprobs and policy version). The harness
re-executes its tool calls, so the workspace is rebuilt by the harness itself; from call j+1 on the
engine samples fresh, and the rollout is a sibling of the parent at its call j.

Each incoming call is matched to a recorded call that is still unused:
- ``exact``: the rendered prompt ids equal the recorded ones;
- ``meaning``: the prompts decode to the same text once ids, dates and clock readings are masked
  (render/normalize.py: mask_volatile): a session id or an `ls -l` time that changed between the
  two runs does not stop the replay;
- otherwise the harness has **diverged**: the call is sampled fresh, the replay ends, and the
  rollout's lineage says so (it is never used as a sibling; tree/filters.py).

A replayed answer is stored like any call, marked ``meta["replay"] = {"of": <parent call id>,
"match": ...}``; its tokens were sampled once, by the parent, and train once (the tree builder keeps
a replayed completion as context, never as a decision). Matching is by unused recorded call rather
than by position, so side calls a harness sends in a different order still find their answers."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence

from harnessrl.render.normalize import mask_volatile
from harnessrl.store.records import served_calls

if TYPE_CHECKING:
    from harnessrl.store.run_store import RunStore

EXACT, MEANING = "exact", "meaning"


@dataclass(frozen=True)
class ReplayCall:
    """One recorded answer to give again."""

    call_id: str
    prompt_ids: tuple[int, ...]
    sampled_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    policy_version: int
    finish_reason: str


@dataclass(frozen=True)
class ReplayHit:
    """The answer for one incoming call, or (call None) the divergence that ended the replay."""

    call: ReplayCall | None
    match: str  # EXACT | MEANING | "diverged"
    expected: str = ""  # on divergence: the recorded call id the harness's call was compared with


class ReplayScript:
    """The recorded calls a branch replays (thread-safe: a harness may send calls in parallel)."""

    def __init__(self, parent_rollout: str, calls: Sequence[ReplayCall]):
        if not calls:
            raise ValueError(f"nothing to replay: rollout {parent_rollout!r} has no served call to branch after")
        self.parent_rollout = parent_rollout
        self.calls = tuple(calls)
        self._unused = list(self.calls)
        self._lock = threading.Lock()
        self.diverged = False

    @property
    def pending(self) -> int:
        """Recorded calls not answered yet (0 once the replay is over or ended by a divergence)."""
        with self._lock:
            return len(self._unused)

    def take(self, prompt_ids: Sequence[int], decode: Callable[[Sequence[int]], str] | None) -> ReplayHit | None:
        """The recorded answer for a call with these prompt ids; None when the replay is over (the
        call samples fresh). A call that matches no unused recorded call ends the replay."""
        with self._lock:
            if not self._unused:
                return None
            prompt = tuple(prompt_ids)
            for i, rec in enumerate(self._unused):
                if rec.prompt_ids == prompt:
                    return ReplayHit(self._unused.pop(i), EXACT)
            if decode is not None:
                text = mask_volatile(decode(prompt))
                for i, rec in enumerate(self._unused):
                    if mask_volatile(decode(rec.prompt_ids)) == text:
                        return ReplayHit(self._unused.pop(i), MEANING)
            expected = self._unused[0].call_id
            self._unused.clear()
            self.diverged = True
            return ReplayHit(None, "diverged", expected)


def load_script(store: RunStore, parent_rollout: str, n_calls: int) -> ReplayScript:
    """The first `n_calls` served calls of `parent_rollout`, read from the proxy's run store
    (ValueError when it has fewer)."""
    if n_calls < 1:
        raise ValueError(f"replay calls must be >= 1, got {n_calls}")
    served = served_calls(store.list_calls([parent_rollout]))
    if len(served) < n_calls:
        raise ValueError(f"rollout {parent_rollout!r} has {len(served)} served calls; cannot replay {n_calls}")
    return ReplayScript(parent_rollout, [
        ReplayCall(c.call_id, tuple(int(i) for i in c.prompt_ids), tuple(int(i) for i in c.sampled_ids),
                   tuple(float(x) for x in c.logprobs), int(c.policy_version), str(c.finish_reason))
        for c in served[:n_calls]])
