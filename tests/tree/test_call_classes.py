"""Call classes from the calls themselves (store/call_classes.py), the side-call filter setting
(train | drop | weight) and the class counts the tree shows."""

from __future__ import annotations

import numpy as np

from harnessrl.algo.advantages import grpo
from harnessrl.store.call_classes import classify_calls
from harnessrl.tree.build import build_tree
from harnessrl.tree.filters import FilterConfig
from tests.support.synthetic import make_call, make_rollout

SYSTEM = list(range(100, 140))  # the main line's system prompt + tools (40 tokens)


def opencode_like(rid: str) -> list:
    """A title generator first (own prompt), a 3-turn main line, a compaction onto the same system
    prompt that is continued, a retry, and a memory extractor at the end (own prompt)."""
    t1 = SYSTEM + [1, 2]
    a1 = [10, 11]
    t2 = t1 + a1 + [3, 4]
    a2 = [12, 13]
    t3 = t2 + a2 + [5]
    a3 = [14]
    comp = SYSTEM + [7, 7, 7]  # history rewritten: a summary after the same system prompt
    a4 = [15]
    after = comp + a4 + [8]
    return [
        make_call(rid, 0, [900, 901, 902, 903], [50, 51]),  # title: "Fix the bug"
        make_call(rid, 1, t1, a1), make_call(rid, 2, t2, a2), make_call(rid, 3, t3, a3),
        make_call(rid, 4, t3, [16]),  # retry of seq 3
        make_call(rid, 5, comp, a4), make_call(rid, 6, after, [17]),
        make_call(rid, 7, [800, 801, 802] + a3, [60, 61, 62]),  # memory extractor (a 1-token reply in it: chance)
    ]


def test_classes_come_from_prefix_relations():
    calls = opencode_like("r0")
    classes = [classify_calls(calls)[c.call_id] for c in calls]
    assert classes == ["side", "main", "main", "main", "retry", "compaction", "main", "side"]


def test_a_spliced_reply_continues_and_a_lone_call_is_side():
    calls = opencode_like("r0")[:4]
    spliced = make_call("r0", 7, [800, 801] + [20, 21, 22, 23] + [802], [60, 61])  # re-rendered history
    reply = make_call("r0", 6, [700], [20, 21, 22, 23])
    classes = classify_calls([*calls, reply, spliced])
    assert classes[spliced.call_id] == "main" and classes[reply.call_id] == "main"
    lone = make_call("r0", 8, [800, 801, 802], [60, 61])
    assert classify_calls([*calls, lone])[lone.call_id] == "side"


def test_single_turn_rollouts_are_all_main():
    calls = [make_call("r0", 0, SYSTEM + [1], [2]), make_call("r0", 1, [900, 901], [3])]
    assert set(classify_calls(calls).values()) == {"main"}  # nothing tells a main line from the rest


def test_side_calls_drop_by_default_train_or_weight():
    calls = opencode_like("r0") + opencode_like("r1")
    rollouts = [make_rollout("r0", 1.0), make_rollout("r1", 0.0)]
    side_ids = {c.call_id for c in calls if c.seq == 0}
    dropped = build_tree(calls, rollouts)
    assert dropped.stats.filtered["side_calls"] == 4
    assert dropped.rollouts["r0"].call_classes == {"main": 4, "side": 2, "retry": 1, "compaction": 1}
    title = [n for n in dropped.nodes if 50 in n.tokens.tolist()]
    assert not any(n.decision.any() for n in title)  # the title's tokens are context, not decisions
    trained = build_tree(calls, rollouts, FilterConfig(side_calls="train", prune=False))
    assert "side_calls" not in trained.stats.filtered
    assert any(n.decision.any() for n in trained.nodes if 50 in n.tokens.tolist())
    weighted = build_tree(calls, rollouts, FilterConfig(side_calls="weight", side_call_weight=0.25, prune=False))
    (node,) = [n for n in weighted.nodes if n.tokens.tolist() == [50, 51]]
    assert node.loss_weight is not None and node.loss_weight.tolist() == [0.25, 0.25]
    full, quarter = grpo(trained), grpo(weighted)
    q = weighted.flat().node_offsets[node.id]
    assert np.isclose(quarter.weight_sum[q], 0.25 * full.weight_sum[q]) and full.weight_sum[q] > 0
    assert side_ids  # both rollouts' titles were side calls


def test_tree_show_lists_the_classes(tmp_path):
    from typer.testing import CliRunner

    from harnessrl.app.main import app
    from harnessrl.store import RunStore

    with RunStore(tmp_path) as store:
        store.insert_calls(opencode_like("r0"))
        store.put_rollout(make_rollout("r0", 1.0))
    r = CliRunner().invoke(app, ["tree", "show", str(tmp_path)], env={"COLUMNS": "250"})
    assert r.exit_code == 0, r.output
    assert "main 4, side 2, retry 1, compaction 1" in r.output
