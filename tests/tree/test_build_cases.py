"""Hand-built conversations: multi-turn, compaction, retries, parallel calls, filters, stats."""

from __future__ import annotations

import numpy as np
import pytest

from harnessrl.tree import FilterConfig, build_tree, sum_stats
from tests.support.synthetic import claude_code_group, conversation_calls, make_call, make_rollout

SYSTEM = list(range(100, 120))
WITHIN = {"retry", "parallel", "restart", "rewrite"}


def within_branches(tree) -> int:
    return sum(v for k, v in tree.stats.branch_reasons.items() if k in WITHIN)


def linear(rid: str, n_turns: int = 4, base: int = 1000):
    turns = [([base + 10 * k + 1, base + 10 * k + 2], [base + 10 * k + 5]) for k in range(n_turns)]
    return conversation_calls(rid, SYSTEM, turns)


def test_linear_multi_turn_is_one_path():
    calls = linear("a")
    tree = build_tree(calls, [make_rollout("a", 1.0)])
    assert len(tree.paths) == 1
    assert tree.stats.branches == 0
    assert all(len(n.children) <= 1 for n in tree.nodes)
    last = calls[-1]
    assert tree.path_tokens(0).tolist() == last.prompt_ids + last.sampled_ids
    assert tree.stats.decision_tokens == 2 * 4
    # per-call training would recompute the growing history every turn
    assert tree.stats.per_call_tokens == sum(len(c.prompt_ids) + len(c.sampled_ids) for c in calls)
    assert tree.stats.per_rollout_tokens == tree.stats.unique_tokens


def test_sampled_span_reused_as_context_stays_a_decision():
    calls = linear("a", 2)
    tree = build_tree(calls, [make_rollout("a", 1.0)])
    flat = tree.flat()
    first_completion = calls[0].sampled_ids
    pos = len(SYSTEM)
    assert flat.tokens[pos:pos + 2].tolist() == first_completion
    assert flat.decision[pos:pos + 2].all()
    assert np.allclose(flat.engine_logprobs[pos:pos + 2], calls[0].logprobs)
    assert (flat.policy_version[pos:pos + 2] == 0).all()
    assert np.isnan(flat.engine_logprobs[:pos]).all() and (flat.policy_version[:pos] == -1).all()


def test_compaction_branches_at_the_right_depth():
    calls = linear("a", 3)
    history = calls[-1].prompt_ids + calls[-1].sampled_ids
    keep = len(SYSTEM) + 3  # the compacted prompt keeps the system prompt + first 3 history tokens
    summary = [7, 7, 7]
    calls.append(make_call("a", 3, history[:keep] + summary, [8, 9]))
    tree = build_tree(calls, [make_rollout("a", 1.0)])
    branch = [n for n in tree.nodes if n.branch_reason]
    assert len(branch) == 1
    assert branch[0].start_pos == keep
    assert branch[0].branch_reason == "restart"  # the summary resends none of the earlier output
    assert len(tree.paths) == 2 and {p.rollout_id for p in tree.paths} == {"a"}


def test_edited_history_that_resends_earlier_output_is_a_rewrite():
    calls = linear("a", 2)
    first = calls[0]
    # the harness drops the first reply's first token (e.g. its thinking) but resends the rest
    prompt = SYSTEM + first.sampled_ids[1:] + [1005]
    prov = [-1] * len(SYSTEM) + [0] * (len(first.sampled_ids) - 1) + [-1]
    calls.append(make_call("a", 2, prompt, [9], provenance=prov))
    tree = build_tree(calls, [make_rollout("a", 1.0)])
    assert tree.stats.branch_reasons == {"rewrite": 1}


def test_restart_inside_first_prompt_is_labelled_restart():
    calls = linear("a", 2)
    calls.append(make_call("a", 2, SYSTEM[:5] + [1, 2, 3], [4]))  # a sub-agent with its own prompt
    tree = build_tree(calls, [make_rollout("a", 1.0)])
    assert tree.stats.branch_reasons == {"restart": 1}


def test_exact_duplicates_merge_and_count_once():
    calls = linear("a", 3)
    dup = calls[1]
    calls.insert(2, make_call("a", dup.seq, dup.prompt_ids, dup.sampled_ids, call_id="a:dup"))
    tree = build_tree(calls, [make_rollout("a", 1.0)])
    single = build_tree(linear("a", 3), [make_rollout("a", 1.0)])
    assert tree.stats.merged_duplicates == 1
    assert tree.stats.unique_tokens == single.stats.unique_tokens
    assert tree.stats.per_call_tokens == single.stats.per_call_tokens
    assert len(tree.paths) == 1 and tree.stats.branches == 0


def test_a_complete_duplicate_of_a_truncated_call_still_trains():
    """The same completion cut by max_tokens first (untrainable), then sent again and complete: one
    merged call, and the complete one's tokens are decisions (hypothesis seed 5993 of
    tests/algo/test_exactness.py: they used to be dropped with the truncated twin)."""
    cut = make_call("a", 0, [7, 7, 1], [2, 0], finish="length")
    full = make_call("a", 1, [7, 7, 1], [2, 0])
    tree = build_tree([cut, full], [make_rollout("a", 1.0)])
    assert tree.stats.merged_duplicates == 1 and tree.stats.calls == 1
    assert tree.stats.decision_tokens == 2 and tree.stats.per_call_tokens == 5
    decisions = [int(t) for n in tree.nodes for t, d in zip(n.tokens, n.decision) if d]
    assert decisions == [2, 0]
    # the other order is a plain duplicate: the complete call is in first and trains
    assert build_tree([full, make_call("a", 2, [7, 7, 1], [2, 0], finish="length")],
                      [make_rollout("a", 1.0)]).stats.decision_tokens == 2


def test_retry_branch_only_last_attempt_trains():
    calls = linear("a", 2)
    retry = make_call("a", 2, calls[1].prompt_ids, [555, 556], call_id="a:retry")
    calls = [calls[0], calls[1], retry]
    tree = build_tree(calls, [make_rollout("a", 1.0)])
    assert tree.stats.branch_reasons == {"retry": 1}
    assert tree.stats.filtered.get("duplicate_branches") == 1
    # the dead first attempt is pruned; the retry's tokens are decisions
    assert 555 in tree.flat().tokens[tree.flat().decision]
    assert not set(calls[1].sampled_ids) & set(tree.flat().tokens.tolist())
    kept_all = build_tree(calls, [make_rollout("a", 1.0)], FilterConfig(duplicate_branches=False))
    assert kept_all.stats.decision_tokens == tree.stats.decision_tokens + 2


def test_parallel_calls_are_labelled_parallel():
    a = make_call("a", 0, SYSTEM + [1], [2], t_start=0.0, t_end=5.0)
    b = make_call("a", 1, SYSTEM + [3], [4], t_start=1.0, t_end=4.0)
    tree = build_tree([a, b], [make_rollout("a", 1.0)])
    assert tree.stats.branch_reasons == {"parallel": 1}


def test_openclaw_internal_tail_gives_a_tail_branch():
    internal = [900, 901, 902]
    c0 = make_call("a", 0, SYSTEM + [1] + internal, [2, 3])
    prov = [-1] * (len(SYSTEM) + 1) + [0, 0] + [-1] * 4  # the resent completion is exact history
    c1 = make_call("a", 1, SYSTEM + [1] + [2, 3] + [4] + internal, [5], provenance=prov)
    tree = build_tree([c0, c1], [make_rollout("a", 1.0)])
    branch = [n for n in tree.nodes if n.branch_reason]
    # the first completion is not a prefix of the second call's prompt: the tail branches
    assert [n.branch_reason for n in branch] == ["rewrite"]
    assert branch[0].start_pos == len(SYSTEM) + 1


def test_group_branch_reasons():
    a = make_call("a", 0, SYSTEM, [1, 2])
    b = make_call("b", 0, SYSTEM, [1, 3])
    c = make_call("c", 0, SYSTEM[:-1] + [77], [1])
    tree = build_tree([a, b, c], [make_rollout(r, 0.0) for r in "abc"])
    assert tree.stats.branch_reasons == {"group_sample": 1, "group_context": 1}
    assert len(tree.paths) == 3
    # the shared sampled token 1 is one decision token
    assert tree.stats.decision_tokens == 1 + 1 + 1 + 1


@pytest.mark.parametrize("status", ["harness_error", "timeout", "sandbox_error", "verifier_error"])
def test_abnormal_rollouts_contribute_no_decision_tokens(status):
    calls = linear("a") + linear("b", base=2000)
    rollouts = [make_rollout("a", 1.0), make_rollout("b", None, status=status)]
    tree = build_tree(calls, rollouts)
    assert tree.rollouts["b"].kept is False and tree.rollouts["b"].filter_reason == "abnormal_rollouts"
    assert tree.stats.filtered == {"abnormal_rollouts": 1}
    only_a = build_tree(linear("a"), [make_rollout("a", 1.0)])
    assert tree.stats.decision_tokens == only_a.stats.decision_tokens
    assert tree.stats.unique_tokens == only_a.stats.unique_tokens  # b's own branch is pruned
    full = build_tree(calls, rollouts, FilterConfig(prune=False))
    assert full.stats.decision_tokens == only_a.stats.decision_tokens
    assert full.stats.unique_tokens > only_a.stats.unique_tokens


def test_truncated_completion_filters():
    calls = [make_call("a", 0, SYSTEM, [1, 2, 3], finish="length"), make_call("a", 1, SYSTEM + [1, 2, 3, 4], [5])]
    per_call = build_tree(calls, [make_rollout("a", 1.0)])
    assert per_call.stats.filtered == {"truncated_calls": 1}
    assert per_call.stats.decision_tokens == 1
    whole = build_tree(calls, [make_rollout("a", 1.0)], FilterConfig(truncated="rollout"))
    assert whole.stats.filtered == {"truncated_rollouts": 1} and whole.stats.decision_tokens == 0
    keep = build_tree(calls, [make_rollout("a", 1.0)], FilterConfig(truncated="keep"))
    assert keep.stats.decision_tokens == 4


def test_length_cap_and_missing_reward():
    calls = linear("a") + linear("b", base=2000, n_turns=1)
    capped = build_tree(calls, [make_rollout("a", 1.0), make_rollout("b", 0.0)],
                        FilterConfig(max_path_tokens=len(SYSTEM) + 5))
    assert capped.stats.filtered == {"too_long_rollouts": 1}
    assert capped.kept_rollouts() == ["b"]
    no_reward = build_tree(calls, [make_rollout("a", None), make_rollout("b", 0.0)])
    assert no_reward.stats.filtered == {"no_reward": 1}


def test_error_and_orphan_calls_are_skipped():
    calls = linear("a", 2) + [make_call("a", 9, SYSTEM, [], status="error"), make_call("zz", 0, [1], [2])]
    tree = build_tree(calls, [make_rollout("a", 1.0)])
    assert tree.stats.filtered == {"error_calls": 1, "orphan_calls": 1}
    assert tree.stats.calls == 2


def test_bad_config_and_corrupt_call_raise_clear_errors():
    with pytest.raises(ValueError, match="truncated"):
        FilterConfig(truncated="drop")
    bad = make_call("a", 0, [1], [2, 3], logprobs=[-1.0])
    with pytest.raises(ValueError, match="logprobs"):
        build_tree([bad], [make_rollout("a", 1.0)])


def test_stats_sum_over_trees_and_sharing():
    trees = [build_tree(*claude_code_group(4, 2000, 4, seed=s, group_id=f"g{s}")) for s in range(2)]
    total = sum_stats(t.stats for t in trees)
    assert total.trees == 2
    assert total.unique_tokens == sum(t.stats.unique_tokens for t in trees)
    d = total.to_dict()
    for key in ("unique_tokens", "decision_tokens", "per_call_tokens", "per_rollout_tokens", "branches",
                "merged_duplicates", "filtered"):
        assert key in d
    # a shared 2k prefix and 4 growing conversations: the tree computes far fewer tokens
    assert total.per_call_tokens > 2.5 * total.unique_tokens
    assert total.per_rollout_tokens > total.unique_tokens
    assert total.branch_reasons == {"group_sample": 2 * 3}


def test_mixed_harness_roots_branch_at_the_root():
    a = conversation_calls("a", [1, 2, 3], [([4], [5])])
    b = conversation_calls("b", [9, 8, 7], [([6], [5])])
    rollouts = [make_rollout("a", 1.0, harness="claude-code"), make_rollout("b", 0.0, harness="codex")]
    tree = build_tree(a + b, rollouts)
    assert len(tree.root.children) == 2
    assert tree.flat().parent_index[tree.flat().node_offsets[tree.root.children[1]]] == -1
