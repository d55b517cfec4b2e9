"""Filters applied while building a tree; each is configurable and counted in ``TreeStats.filtered``.

Rollout filters (a filtered rollout stays visible in views but contributes no decision tokens and
no reward to group statistics; it is excluded from the loss, never scored 0):

- ``abnormal_rollouts``: status in ``exclude_statuses`` (the infrastructure statuses by default:
  sandbox_error, cancelled, runner_error), or not ok and never scored (the policy sampled nothing).
  A rollout that crashed, timed out or overflowed its context AFTER the policy called the model
  was scored by the runner (0 when nothing was left to score) and is trained on like any other
  (store/records.py: INFRASTRUCTURE_STATUSES, is_scored; docs/training.md).
- ``no_reward``: status ok but no reward recorded.
- ``too_long_rollouts``: some call sequence (= some path) longer than ``max_path_tokens``.
- ``diverged_branches``: a branch (rollout/branching.py) whose harness did not reproduce its
  parent's replayed calls, or stopped before its branch point: it is not the parent's sibling.
- ``truncated_rollouts``: with ``truncated="rollout"``, a rollout with any finish=length call.

Call filters (the call's prompt stays in the tree as context; its completion is not a decision):

- ``truncated_calls``: finish_reason == "length" with ``truncated="call"`` (default).
- ``duplicate_branches``: the harness re-sent the same prompt later in the rollout (a retry): only
  the last attempt's completion trains; earlier attempts are dead branches.
- ``undelivered_calls``: the proxy stored the call but did not see its answer delivered (a crash
  or kill -9 between commit and the last byte, or the harness gone): the harness never acted on
  that completion, so the rollout's reward says nothing about it.
- ``replayed_calls``: a branch's replayed calls (proxy/replay.py): the parent sampled those ids
  and trains them once; in the branch they are context.
- ``side_calls``: with ``side_calls="drop"`` (default), a side call (store/call_classes.py: a
  title, summary or memory call that continues no turn and is not continued); ``"weight"`` trains
  it with ``side_call_weight`` times its loss weight, ``"train"`` like the main line.
- ``error_calls``: calls with status != ok (no completion) are skipped entirely.
- ``orphan_calls``: calls whose rollout is not in the group are skipped.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from harnessrl.store.call_classes import classify_calls
from harnessrl.store.records import INFRASTRUCTURE_STATUSES, CallRecord, RolloutRecord

ABNORMAL_STATUSES = INFRASTRUCTURE_STATUSES  # the default exclude_statuses


class FilterConfig(BaseModel):
    """The filters' settings; also the `filters:` section of a run config."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    exclude_statuses: tuple[str, ...] = ABNORMAL_STATUSES
    truncated: Literal["call", "rollout", "keep"] = "call"  # completions cut by max_tokens
    duplicate_branches: bool = True
    max_path_tokens: int | None = Field(None, gt=0)
    # drop nodes with no decision token in their subtree (trailing context, filtered-only branches);
    # views set False to show everything
    prune: bool = True
    # side calls (store/call_classes.py: a title, summary or memory call that continues no turn and
    # is not continued): drop = context only (default; the rollout's reward says nothing about a
    # title), train = like the main line, weight = trained with side_call_weight times the loss weight
    side_calls: Literal["train", "drop", "weight"] = "drop"
    side_call_weight: float = Field(0.25, ge=0, le=1)


@dataclass
class FilterPlan:
    """Outcome of the filters before insertion."""

    calls: list[CallRecord]  # calls to insert, ordered (rollout order, seq, t_start)
    ids: dict[str, tuple[np.ndarray, np.ndarray]]  # call_id -> (prompt, sampled) int32, converted once
    keys: dict[str, bytes]  # call_id -> digest of (prompt, sampled): exact duplicate detection
    trainable: dict[str, bool]  # call_id -> completion tokens are decisions
    rollout_reason: dict[str, str]  # rollout_id -> filter reason ("" = kept)
    counts: Counter = field(default_factory=Counter)
    classes: dict[str, str] = field(default_factory=dict)  # call_id -> store/call_classes.py class
    weights: dict[str, float] = field(default_factory=dict)  # call_id -> loss weight when not 1


def as_ids(values: Sequence[int] | np.ndarray) -> np.ndarray:
    """Token ids as int32 (free for int32 arrays; about 1 ms per 20k-token Python list)."""
    return np.asarray(values, dtype=np.int32)


def digest(*arrays: np.ndarray) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    for a in arrays:
        h.update(a.tobytes())
        h.update(b"|")
    return h.digest()


def rollout_filter_reason(rollout: RolloutRecord, calls: Sequence[CallRecord], cfg: FilterConfig) -> str:
    if rollout.status in cfg.exclude_statuses:
        return "abnormal_rollouts"
    if rollout.reward is None:
        return "no_reward" if rollout.status == "ok" else "abnormal_rollouts"
    if rollout.lineage is not None and rollout.lineage.diverged:
        return "diverged_branches"
    if cfg.max_path_tokens is not None and any(
            len(c.prompt_ids) + len(c.sampled_ids) > cfg.max_path_tokens for c in calls):
        return "too_long_rollouts"
    if cfg.truncated == "rollout" and any(c.finish_reason == "length" for c in calls):
        return "truncated_rollouts"
    return ""


def plan_filters(calls: Sequence[CallRecord], rollouts: Sequence[RolloutRecord], cfg: FilterConfig) -> FilterPlan:
    """Decide which calls are inserted, which completions train, and which rollouts are kept."""
    order = {r.rollout_id: i for i, r in enumerate(rollouts)}
    counts: Counter = Counter()
    by_rollout: dict[str, list[CallRecord]] = {r.rollout_id: [] for r in rollouts}
    for c in calls:
        if c.rollout_id not in order:
            counts["orphan_calls"] += 1
        elif c.status != "ok":
            counts["error_calls"] += 1
        elif len(c.prompt_ids) + len(c.sampled_ids) > 0:
            by_rollout[c.rollout_id].append(c)
    reasons: dict[str, str] = {}
    ids: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    prompt_keys: dict[str, bytes] = {}
    trainable: dict[str, bool] = {}
    classes: dict[str, str] = {}
    weights: dict[str, float] = {}
    ordered: list[CallRecord] = []
    for r in rollouts:
        rcalls = sorted(by_rollout[r.rollout_id], key=lambda c: (c.seq, c.t_start))
        reason = rollout_filter_reason(r, rcalls, cfg)
        reasons[r.rollout_id] = reason
        if reason:
            counts[reason] += 1
        for c in rcalls:
            ids[c.call_id] = (as_ids(c.prompt_ids), as_ids(c.sampled_ids))
            prompt_keys[c.call_id] = digest(ids[c.call_id][0])
        retried = _retried_calls(rcalls, ids, prompt_keys) if cfg.duplicate_branches else set()
        rclasses = classify_calls(rcalls)
        classes.update(rclasses)
        for c in rcalls:
            ok = not reason
            side = rclasses.get(c.call_id) == "side"
            if ok and "of" in (c.meta.get("replay") or {}):
                ok = False
                counts["replayed_calls"] += 1
            elif ok and c.call_id in retried:
                ok = False
                counts["duplicate_branches"] += 1
            elif ok and not c.delivered:
                ok = False
                counts["undelivered_calls"] += 1
            elif ok and cfg.truncated == "call" and c.finish_reason == "length":
                ok = False
                counts["truncated_calls"] += 1
            elif ok and side and cfg.side_calls == "drop":
                ok = False
                counts["side_calls"] += 1
            if ok and side and cfg.side_calls == "weight":
                weights[c.call_id] = cfg.side_call_weight
            trainable[c.call_id] = ok
        ordered.extend(rcalls)
    keys = {cid: digest(np.frombuffer(prompt_keys[cid], np.uint8), q) for cid, (_, q) in ids.items()}
    return FilterPlan(calls=ordered, ids=ids, keys=keys, trainable=trainable, rollout_reason=reasons,
                      counts=counts, classes=classes, weights=weights)


def _retried_calls(rcalls: Sequence[CallRecord], ids: dict[str, tuple[np.ndarray, np.ndarray]],
                   prompt_keys: dict[str, bytes]) -> set[str]:
    """Calls whose exact prompt was sent again later in the rollout with a different completion."""
    last_by_prompt = {prompt_keys[c.call_id]: c for c in rcalls}
    retried = set()
    for c in rcalls:
        last = last_by_prompt[prompt_keys[c.call_id]]
        if last.call_id != c.call_id and not np.array_equal(ids[last.call_id][1], ids[c.call_id][1]):
            retried.add(c.call_id)
    return retried
