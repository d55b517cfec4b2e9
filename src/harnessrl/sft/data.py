"""What `harnessrl sft` trains on: prefix trees of recorded calls, read from run stores.

- rejection sampling (`rejection_trees`): the passing rollouts of a run (status ok, reward >=
  `min_reward`), any harness, one tree per group, so a group's shared prompt is computed once;
- distillation (`distill_trees`): every served call of a run (e.g. `harnessrl serve` in front of
  a stronger model while a harness ran against it), one tree per group of rollouts, or per
  rollout id for calls recorded without a rollout record (a serving run's keys and /v1 route).

The ids are the recorded ones, never re-tokenised (train = serve). `check_tokenizers` refuses
runs whose ids come from another tokenizer than the student's, or from more than one.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harnessrl.errors import HarnessRLError
from harnessrl.render.fingerprint import recorded_tokenizers, tokenizer_fingerprint
from harnessrl.store.groups import drop_abandoned_attempts
from harnessrl.store.records import CallRecord, RolloutRecord
from harnessrl.tree.build import build_tree
from harnessrl.tree.filters import FilterConfig
from harnessrl.tree.nodes import PrefixTree

if TYPE_CHECKING:
    from harnessrl.store.run_store import RunStore

MODES = ("rejection", "distill")
# SFT keeps cut completions (they are the teacher's tokens all the same) and every status the
# caller selected; trees are pruned to the branches that hold sampled tokens.
SFT_FILTERS = FilterConfig(exclude_statuses=(), truncated="keep", duplicate_branches=True)


class SFTDataError(HarnessRLError, ValueError):
    """The runs give nothing to train on, or ids from another tokenizer (the message says the fix)."""


@dataclass(frozen=True)
class SFTGroup:
    """One recorded group's trained rollouts and their calls (what one of SFTData.trees holds)."""

    harness: str
    rollouts: list[RolloutRecord]
    calls: list[CallRecord]


@dataclass(frozen=True)
class SFTData:
    trees: list[PrefixTree]  # one per recorded group
    groups: list[SFTGroup]  # the same groups, to pack per harness (`harness_trees`)
    rollouts: int  # rollouts (or rollout ids) trained on
    calls: int
    sampled_tokens: int  # decision tokens, each tree token once


def check_tokenizers(stores: dict[Path, RunStore], student_tokenizer: Any) -> list[str]:
    """Refuse a run that recorded two tokenizers, or one that is not the student's; returns
    warnings for runs that recorded none (written before the record existed)."""
    want = tokenizer_fingerprint(student_tokenizer)
    warnings = []
    for run_dir, store in stores.items():
        seen = recorded_tokenizers(store)
        if not seen:
            warnings.append(f"{run_dir}: no tokenizer recorded (an older run); its ids are assumed to be "
                            "the student's tokenizer's")
            continue
        if len({e["fingerprint"] for e in seen}) > 1:
            names = ", ".join(e.get("name") or e["fingerprint"] for e in seen)
            raise SFTDataError(f"{run_dir} mixes tokenizers ({names}): its ids do not share one vocabulary. "
                               "Fix: train on a run served by one model family, or split the run")
        if seen[0]["fingerprint"] != want:
            raise SFTDataError(f"{run_dir} was served with another tokenizer ({seen[0].get('name') or '?'}) than "
                               f"the student's ({getattr(student_tokenizer, 'name_or_path', '?')}): the recorded "
                               "ids would mean other tokens. Fix: pick a student of the same model family "
                               "(same tokenizer) with --model")
    return warnings


def rejection_trees(store: RunStore, min_reward: float = 1.0, harness: str | None = None) -> SFTData:
    """Trees of the passing rollouts (status ok, reward >= min_reward; optionally one harness)."""
    rollouts = drop_abandoned_attempts(store.list_rollouts())
    passing = [r for r in rollouts if r.status == "ok" and r.reward is not None and r.reward >= min_reward
               and (harness is None or r.harness == harness)]
    if not passing:
        scored = sum(r.reward is not None for r in rollouts)
        raise SFTDataError(f"no passing rollout in {getattr(store, 'run_dir', 'the run')} ({len(rollouts)} rollouts, "
                           f"{scored} scored, none with status ok and reward >= {min_reward:g}"
                           f"{' through ' + harness if harness else ''}). Fix: collect more rollouts "
                           "(`harnessrl rollout ... -n 8`), lower --min-reward, or use --mode distill")
    return _trees(store, passing)


def distill_trees(store: RunStore) -> SFTData:
    """Trees of every served call: grouped as recorded, or one per rollout id without a record."""
    calls = [c for c in store.list_calls(as_arrays=True) if c.status == "ok" and len(c.sampled_ids) > 0]
    if not calls:
        raise SFTDataError(f"no served call in {getattr(store, 'run_dir', 'the run')}. Fix: point --run at the "
                           "run dir of `harnessrl serve --run-dir` (or of a rollout/train run)")
    known = {r.rollout_id: r for r in drop_abandoned_attempts(store.list_rollouts())}
    rollouts = [known.get(rid) or RolloutRecord(rollout_id=rid, task_id=rid, harness="serve", group_id=rid,
                                                status="ok", reward=1.0)
                for rid in sorted({c.rollout_id for c in calls})]
    return _trees(store, [r if r.status == "ok" else _as_ok(r) for r in rollouts], calls)


def _as_ok(r: RolloutRecord) -> RolloutRecord:
    from dataclasses import replace

    return replace(r, status="ok", reward=1.0)  # distillation trains every served call, whatever the outcome


def _trees(store: RunStore, rollouts: list[RolloutRecord], calls: list[CallRecord] | None = None) -> SFTData:
    by_group: dict[str, list[RolloutRecord]] = defaultdict(list)
    for r in rollouts:
        by_group[r.group_id].append(r)
    if calls is None:
        calls = store.list_calls([r.rollout_id for r in rollouts], as_arrays=True)
    by_rollout: dict[str, list[CallRecord]] = defaultdict(list)
    for c in calls:
        by_rollout[c.rollout_id].append(c)
    trees, groups = [], []
    for members in by_group.values():
        members = sorted(members, key=lambda r: (r.sample_idx, r.rollout_id))
        group_calls = sorted((c for r in members for c in by_rollout[r.rollout_id]), key=lambda c: (c.rollout_id, c.seq))
        tree = build_tree(group_calls, members, SFT_FILTERS)
        if tree.stats.decision_tokens:
            trees.append(tree)
            groups.append(SFTGroup(members[0].harness, members, group_calls))
    if not trees:
        raise SFTDataError("the selected rollouts hold no sampled token to train on")
    return SFTData(trees, groups, rollouts=sum(len(t.kept_rollouts()) for t in trees),
                   calls=sum(t.stats.calls for t in trees),
                   sampled_tokens=sum(t.stats.decision_tokens for t in trees))


def harness_trees(groups: Sequence[SFTGroup]) -> list[PrefixTree]:
    """One prefix tree per harness over the groups' calls: the system prompt, tools and worked
    examples a harness sends in every rollout are stored and computed once, not once per task.
    The SFT loss is the same (train/sft.py weighs a token by the rollouts that sampled it)."""
    by_harness: dict[str, tuple[list[RolloutRecord], list[CallRecord]]] = {}
    for g in groups:
        rollouts, calls = by_harness.setdefault(g.harness, ([], []))
        rollouts.extend(g.rollouts)
        calls.extend(g.calls)
    trees = [build_tree(calls, rollouts, SFT_FILTERS) for rollouts, calls in by_harness.values()]
    return [t for t in trees if t.stats.decision_tokens]
