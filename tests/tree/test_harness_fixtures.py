"""Trees of the conversations real harnesses (Claude Code, Codex, ...) produced against the proxy.

Fixtures: tests/fixtures/harness_calls/<harness>*.jsonl, one JSON object per line: a CallRecord
(``harnessrl calls RUN --export x.jsonl``) or a RolloutRecord (lines without prompt_ids). A
conversation is the calls of one rollout_id. Claude Code, Codex, mini-swe-agent and the builtin
agent resend the whole history, so with exact history reuse each conversation must be one path with
no within-rollout branch; OpenClaw may only branch at its dropped internal-context tail.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from harnessrl.store.records import CallRecord, RolloutRecord
from harnessrl.tree import FilterConfig, build_tree

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "harness_calls"
# OpenClaw appends an internal-context user message to each request and drops it from the next one
# (docs/harnesses.md): a tail branch per turn is expected there; every other harness resends verbatim.
TAIL_REWRITE = ("openclaw",)
WITHIN_ROLLOUT = {"retry", "parallel", "restart", "rewrite"}


def fixture_files() -> list[Path]:
    return sorted(FIXTURES.glob("*.jsonl")) if FIXTURES.is_dir() else []


def load_fixture(path: Path) -> tuple[list[CallRecord], list[RolloutRecord]]:
    call_fields = {f.name for f in dataclasses.fields(CallRecord)}
    rollout_fields = {f.name for f in dataclasses.fields(RolloutRecord)}
    calls, rollouts = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        obj = json.loads(line)
        if "prompt_ids" in obj:
            calls.append(CallRecord(**{k: v for k, v in obj.items() if k in call_fields}))
        elif "task_id" in obj:
            rollouts.append(RolloutRecord(**{k: v for k, v in obj.items() if k in rollout_fields}))
    known = {r.rollout_id for r in rollouts}
    for rid in dict.fromkeys(c.rollout_id for c in calls):
        if rid not in known:  # calls-only fixture: one ok rollout per conversation
            rollouts.append(RolloutRecord(rollout_id=rid, task_id=path.stem, harness=path.stem,
                                          group_id=path.stem, status="ok", reward=1.0))
    return calls, rollouts


def _ids(path: Path) -> str:
    return path.stem


@pytest.fixture(params=fixture_files() or [None], ids=lambda p: _ids(p) if p else "missing")
def fixture_path(request) -> Path:
    if request.param is None:
        pytest.skip(f"no captured harness calls yet: expected {FIXTURES}/*.jsonl "
                    "(committed by the harness engineer from real Claude Code / Codex runs)")
    return request.param


def test_each_call_is_reproduced_and_conversations_do_not_branch(fixture_path):
    calls, rollouts = load_fixture(fixture_path)
    ok_calls = [c for c in calls if c.status == "ok"]
    assert ok_calls, f"{fixture_path.name} holds no successful calls"
    for rollout in rollouts:
        own = [c for c in ok_calls if c.rollout_id == rollout.rollout_id]
        if not own:
            continue
        ok = dataclasses.replace(rollout, status="ok", reward=rollout.reward if rollout.reward is not None else 1.0)
        tree = build_tree(own, [ok], FilterConfig(prune=False, truncated="keep", duplicate_branches=False))
        ends = {cid: n.id for n in tree.nodes for cid in n.call_ends}
        for c in own:  # exact: the tree path of every call is its prompt + completion ids
            node, parts = ends.get(c.call_id), []
            if node is None:  # an exact duplicate merged into an earlier call
                continue
            while node > 0:
                parts.append(tree.nodes[node].tokens)
                node = tree.nodes[node].parent
            assert np.concatenate(parts[::-1]).tolist() == list(c.prompt_ids) + list(c.sampled_ids)
        within = {k: v for k, v in tree.stats.branch_reasons.items() if k in WITHIN_ROLLOUT}
        if fixture_path.stem.lower().startswith(TAIL_REWRITE):
            assert set(within) <= {"rewrite"} and sum(within.values()) <= len(own) - 1, within
            continue
        assert not within, f"{rollout.rollout_id}: spurious branches {within}"
        assert len(tree.paths) == 1, f"{rollout.rollout_id}: {len(tree.paths)} paths, expected one"
        # every completion is one decision span on the path: nothing was re-tokenised
        sampled = sum(len(c.sampled_ids) for c in own if c.call_id in ends)
        assert tree.stats.decision_tokens == sampled


def test_group_tree_of_a_fixture(fixture_path):
    """All conversations of a fixture in one tree: shared prefix, branches only between rollouts."""
    calls, rollouts = load_fixture(fixture_path)
    rollouts = [dataclasses.replace(r, status="ok", reward=r.reward if r.reward is not None else 1.0)
                for r in rollouts]
    tree = build_tree(calls, rollouts, FilterConfig(prune=False, truncated="keep", duplicate_branches=False))
    allowed = {"group_sample", "group_context"} | ({"rewrite"} if fixture_path.stem.startswith(TAIL_REWRITE) else set())
    assert set(tree.stats.branch_reasons) <= allowed, tree.stats.branch_reasons
    assert len(tree.root.children) == 1  # one harness: one system prompt start
    assert tree.stats.unique_tokens <= tree.stats.per_rollout_tokens <= tree.stats.per_call_tokens


def test_tree_from_store_arrays_equals_tree_from_records(fixture_path, tmp_path):
    """RunStore.list_calls(as_arrays=True) (what `tree show/stats` read) builds the same tree."""
    from harnessrl.store import RunStore

    calls, rollouts = load_fixture(fixture_path)
    with RunStore(tmp_path) as store:
        store.insert_calls(calls)
        stored = store.list_calls(as_arrays=True)
    assert isinstance(stored[0].prompt_ids, np.ndarray)
    a, b = build_tree(stored, rollouts), build_tree(calls, rollouts)
    fa, fb = a.flat(), b.flat()
    assert np.array_equal(fa.tokens, fb.tokens) and np.array_equal(fa.decision, fb.decision)
    assert np.array_equal(fa.engine_logprobs, fb.engine_logprobs, equal_nan=True)
    assert [n.provenance.tolist() for n in a.nodes] == [n.provenance.tolist() for n in b.nodes]
    assert a.stats.to_dict() == b.stats.to_dict()
