"""What each call of a rollout is, told from the calls themselves (never from the harness's name).

- ``main``: the main line: a call that continues an earlier call (its prompt holds that call's
  prompt + completion, or that call's sampled ids spliced in), or the first call that a later
  call continues; also every call of a rollout in which no call continues another (nothing
  tells a main line from the rest there).
- ``retry``: the same prompt ids as an earlier call (the harness re-sent a request).
- ``compaction``: after the main line started, a call that continues no earlier call but shares
  at least half of the shorter prompt, as a common prefix (the same system prompt and tools), with
  another call: the harness rewrote its history (compaction into a summary, a restart).
- ``side``: a call that continues no earlier call, is continued by none, and shares less than
  half of the shorter prompt with every other call: a title generator, a summariser, a memory
  extractor, each with a system prompt of its own.
  Its completion is not a step of the task, so the rollout's reward says little about it
  (`filters.side_calls`: train | drop | weight).

Only served calls (status ok, with ids) are classified.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from harnessrl.store.records import CallRecord

CALL_CLASSES = ("main", "side", "retry", "compaction")
SHARED_PREFIX = 0.5  # a root call sharing this much of its prompt with the main line is a compaction
MIN_SPLICE = 4  # sampled ids found inside a later prompt count as continued from this many on (not by chance)


def _ids(values: Sequence[int]) -> np.ndarray:
    return np.asarray(values, dtype=np.int32)


def _contains(haystack: np.ndarray, needle: np.ndarray) -> bool:
    """Whether `needle` occurs in `haystack` as a contiguous run of ids."""
    if not len(needle) or len(needle) > len(haystack):
        return False
    h, n = haystack.tobytes(), needle.tobytes()
    at = h.find(n)
    while at >= 0:
        if at % 4 == 0:
            return True
        at = h.find(n, at + 1)
    return False


def _common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    m = min(len(a), len(b))
    diff = np.flatnonzero(a[:m] != b[:m])
    return int(diff[0]) if len(diff) else m


def _linked(j: int, arrays: list[tuple[np.ndarray, np.ndarray]], retry: list[bool]) -> bool:
    """Whether call j's prompt shares at least SHARED_PREFIX of the shorter prompt, as a common
    prefix, with another call's (the same system prompt and tools: one conversation, rewritten)."""
    prompt = arrays[j][0]
    for i, (other, _) in enumerate(arrays):
        if i != j and not retry[i] and _common_prefix(prompt, other) >= SHARED_PREFIX * min(len(prompt), len(other)):
            return True
    return False


def _continues(prompt: np.ndarray, earlier: tuple[np.ndarray, np.ndarray]) -> bool:
    p, s = earlier
    head = len(p) + len(s)
    if len(prompt) >= head and np.array_equal(prompt[:len(p)], p) and np.array_equal(prompt[len(p):head], s):
        return True
    return len(s) >= MIN_SPLICE and _contains(prompt, s)  # our reply spliced into a re-rendered history


def classify_calls(calls: Sequence[CallRecord]) -> dict[str, str]:
    """call_id -> class (CALL_CLASSES) for the served calls of one rollout, in seq order."""
    served = sorted((c for c in calls if c.status == "ok" and len(c.prompt_ids)), key=lambda c: (c.seq, c.t_start))
    arrays = [(_ids(c.prompt_ids), _ids(c.sampled_ids)) for c in served]
    seen: dict[bytes, int] = {}
    retry = [False] * len(served)
    has_parent = [False] * len(served)
    continued = [False] * len(served)
    for j, (prompt, _) in enumerate(arrays):
        key = prompt.tobytes()
        if key in seen:
            retry[j] = True
            continue
        seen[key] = j
        for i in range(j - 1, -1, -1):
            if not retry[i] and len(arrays[i][1]) and _continues(prompt, arrays[i]):
                has_parent[j] = continued[i] = True
                break
    if not any(continued):
        return {c.call_id: ("retry" if retry[j] else "main") for j, c in enumerate(served)}
    out: dict[str, str] = {}
    first_root = True
    for j, c in enumerate(served):
        if retry[j]:
            out[c.call_id] = "retry"
        elif has_parent[j]:
            out[c.call_id] = "main"
        elif continued[j] and first_root:
            out[c.call_id] = "main"
        else:
            linked = _linked(j, arrays, retry)
            if not continued[j] and not linked:
                out[c.call_id] = "side"
            elif linked and not first_root:  # the same system prompt, its history rewritten
                out[c.call_id] = "compaction"
            else:  # a line of its own (a sub-agent) or the main line's start
                out[c.call_id] = "main"
        if out[c.call_id] == "main" and not has_parent[j]:
            first_root = False
    return out


def class_counts(classes: dict[str, str]) -> dict[str, int]:
    """{class: number of calls} in CALL_CLASSES order (classes with no call left out)."""
    counts = Counter(classes.values())
    return {k: counts[k] for k in CALL_CLASSES if counts[k]}
