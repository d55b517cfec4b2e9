"""Prefix-delta storage of prompt ids: call k+1 of a rollout usually starts with call k's prompt +
sampled ids (or, after a harness rewrote the tail, with part of them), so the store keeps only
the ids after the longest shared prefix and a reference to call k.

Storage per rollout grows with the tokens of the conversation instead of turns x prompt length,
and encoding a call costs time proportional to its new tokens. The reference is only taken when
it is verified exactly (list equality), so reading always gives back the ids as inserted.
Provenance is delta-coded too when its prefix equals the base call's prompt provenance +
[base policy version] x sampled ids (exact history); otherwise it is stored in full.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from harnessrl.store.records import CallRecord

_MAX_ROLLOUTS = 4096  # remembered bases (one per recently written rollout)
_MIN_SHARED = 32  # shorter shared prefixes are not worth a reference


@dataclass
class Delta:
    base_call: str | None  # None: prompt ids stored in full
    base_len: int  # leading ids taken from the base call's prompt + sampled ids
    prov_from_base: bool  # provenance prefix derived from the base (else stored in full)
    prompt_ids: list[int]  # what goes in the prompt_ids blob
    provenance: list[int]  # what goes in the prompt_provenance blob


@dataclass
class _Base:
    call_id: str
    ids: list[int]  # prompt + sampled ids
    provenance: list[int]  # prompt provenance + [policy version] * sampled


def common_prefix(a: list[int], b: list[int]) -> int:
    """Length of the longest common prefix, by bisection over C-level slice comparisons
    (O(n log n) element compares in C instead of an O(n) Python loop)."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # invariant: a[:lo] == b[:lo] and a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def full_of(call: CallRecord) -> tuple[Any, Any]:
    """(prompt + sampled ids, their provenance) of a call: what a continuing call may start with.
    Lists for list records, int32 arrays for records read with as_arrays=True."""
    if isinstance(call.prompt_ids, list):
        return (call.prompt_ids + call.sampled_ids,
                call.prompt_provenance + [call.policy_version] * len(call.sampled_ids))
    import numpy as np

    version = np.full(len(call.sampled_ids), call.policy_version, dtype=np.int32)
    return (np.concatenate([call.prompt_ids, call.sampled_ids]).astype(np.int32, copy=False),
            np.concatenate([call.prompt_provenance, version]).astype(np.int32, copy=False))


class PrefixCache:
    """Writer-side memory of the last ok call of each rollout (thread-safe)."""

    def __init__(self) -> None:
        self._bases: OrderedDict[str, _Base] = OrderedDict()
        self._lock = threading.Lock()

    def encode(self, call: CallRecord) -> Delta:
        with self._lock:
            base = self._bases.get(call.rollout_id)
        full = Delta(None, 0, False, call.prompt_ids, call.prompt_provenance)
        if base is None:
            return full
        n = common_prefix(call.prompt_ids, base.ids)
        if n < _MIN_SHARED:
            return full
        if call.prompt_provenance[:n] == base.provenance[:n]:
            return Delta(base.call_id, n, True, call.prompt_ids[n:], call.prompt_provenance[n:])
        return Delta(base.call_id, n, False, call.prompt_ids[n:], call.prompt_provenance)

    def remember(self, call: CallRecord) -> None:
        """After a committed insert: the call becomes its rollout's base (ok calls only)."""
        if call.status != "ok":
            return
        ids, prov = full_of(call)
        with self._lock:
            self._bases[call.rollout_id] = _Base(call.call_id, ids, prov)
            self._bases.move_to_end(call.rollout_id)
            while len(self._bases) > _MAX_ROLLOUTS:
                self._bases.popitem(last=False)

    def forget(self, rollout_ids: set[str]) -> None:
        with self._lock:
            for rid in rollout_ids:
                self._bases.pop(rid, None)


def expand(base: CallRecord | None, base_len: int, prov_from_base: bool, prompt_ids: Any,
           provenance: Any) -> tuple[Any, Any]:
    """Full (prompt ids, provenance) of a stored call from its base call and its stored suffix
    (lists, or int32 arrays when the suffix was decoded as arrays)."""
    if base is None:
        return prompt_ids, provenance
    ids, prov = full_of(base)
    if isinstance(prompt_ids, list):
        return ids[:base_len] + prompt_ids, (prov[:base_len] + provenance) if prov_from_base else provenance
    import numpy as np

    full_prov = np.concatenate([prov[:base_len], provenance]) if prov_from_base else provenance
    return np.concatenate([ids[:base_len], prompt_ids]), full_prov
