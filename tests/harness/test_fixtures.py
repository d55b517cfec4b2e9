"""The committed captures of real harness runs (tests/fixtures/harness_calls/*.jsonl) stay loadable as
CallRecords and keep the properties the tree tests rely on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harnessrl.store.records import PROMPT, CallRecord

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "harness_calls"
EXACT_PREFIX = {"claude-code", "codex", "builtin", "mini-swe-agent"}  # openclaw drops a tail message


def _load(path: Path) -> list[CallRecord]:
    return [CallRecord(**json.loads(line)) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.jsonl")), ids=lambda p: p.stem)
def test_fixture_loads_and_is_consistent(path):
    assert path.stat().st_size < 2_000_000
    calls = _load(path)
    rollouts: dict[str, list[CallRecord]] = {}
    for c in calls:
        assert c.request is None and c.response is None
        assert len(c.prompt_provenance) == len(c.prompt_ids) and len(c.logprobs) == len(c.sampled_ids)
        assert c.meta["harness"] == path.stem
        rollouts.setdefault(c.rollout_id, []).append(c)
    assert len(rollouts) >= 1
    for rid, rcalls in rollouts.items():
        rcalls.sort(key=lambda c: c.seq)
        assert len(rcalls) >= 2, rid
        for k in range(len(rcalls) - 1):
            head = rcalls[k].prompt_ids + rcalls[k].sampled_ids
            nxt = rcalls[k + 1]
            if path.stem in EXACT_PREFIX:
                assert nxt.prompt_ids[:len(head)] == head
                # the reused sampled ids are marked with the policy version that sampled them
                seg = nxt.prompt_provenance[len(rcalls[k].prompt_ids):len(head)]
                assert seg and all(v != PROMPT for v in seg)


def test_fixtures_present():
    names = {p.stem for p in FIXTURES.glob("*.jsonl")}
    assert {"claude-code", "codex"} <= names
