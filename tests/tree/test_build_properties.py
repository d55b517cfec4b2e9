"""Property tests: the tree against a brute-force per-token trie on random call sets."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harnessrl.tree import FilterConfig, build_tree
from tests.support.synthetic import make_call, make_rollout

TOKENS = st.lists(st.integers(0, 3), min_size=0, max_size=6)


@st.composite
def call_sets(draw):
    """Rollouts whose calls extend, rewrite, retry, duplicate or restart their history."""
    calls, rollouts = [], []
    for i in range(draw(st.integers(1, 4))):
        rid = f"r{i}"
        prev_seq: list[int] = []
        prev_call = None
        for k in range(draw(st.integers(1, 5))):
            kind = draw(st.sampled_from(["extend", "extend", "rewrite", "retry", "dup", "fresh"]))
            if prev_call is None:
                kind = "fresh"
            if kind == "dup":
                calls.append(make_call(rid, k, prev_call.prompt_ids, prev_call.sampled_ids,
                                       logprobs=prev_call.logprobs, finish=prev_call.finish_reason))
                continue
            if kind == "extend":
                prompt = prev_seq + draw(TOKENS)
            elif kind == "rewrite":
                prompt = prev_seq[:draw(st.integers(0, len(prev_seq)))] + draw(TOKENS)
            elif kind == "retry":
                prompt = list(prev_call.prompt_ids)
            else:
                prompt = draw(TOKENS)
            sampled = draw(TOKENS)
            if not prompt and not sampled:
                prompt = [0]
            finish = draw(st.sampled_from(["stop", "stop", "length"]))
            logprobs = [-(i + 1) - 0.1 * k - 0.01 * j for j in range(len(sampled))]
            call = make_call(rid, k, prompt, sampled, logprobs=logprobs, finish=finish, version=i)
            calls.append(call)
            prev_call, prev_seq = call, prompt + sampled
        status = draw(st.sampled_from(["ok", "ok", "ok", "timeout", "harness_error"]))
        rollouts.append(make_rollout(rid, draw(st.sampled_from([0.0, 0.5, 1.0])), status))
    return draw(st.permutations(calls)), rollouts


def reference(calls, rollouts, cfg: FilterConfig):
    """Brute force: prefix tuple -> (decision, logprob) from the first trainable sampling call."""
    kept = {r.rollout_id for r in rollouts if r.status == "ok" and r.reward is not None}
    order = {r.rollout_id: i for i, r in enumerate(rollouts)}
    ordered = sorted(calls, key=lambda c: (order[c.rollout_id], c.seq))

    def trainable_of(c) -> bool:
        same_prompt = [d for d in ordered if d.rollout_id == c.rollout_id and d.prompt_ids == c.prompt_ids]
        retried = cfg.duplicate_branches and same_prompt[-1].sampled_ids != c.sampled_ids
        return c.rollout_id in kept and not retried and c.finish_reason != "length"

    # exact duplicates merge; one that trains after untrainable twins still marks its decisions
    seen: dict[tuple, bool] = {}
    inserted, merged = [], 0
    for c in ordered:
        key = (c.rollout_id, tuple(c.prompt_ids), tuple(c.sampled_ids))
        trains = trainable_of(c)
        if key in seen:
            merged += 1
            if seen[key] or not trains:
                continue
        seen[key] = trains
        inserted.append(c)
    prefixes: dict[tuple, tuple[bool, float]] = {}
    owners: dict[tuple, set[str]] = {}
    for c in inserted:
        trainable = trainable_of(c)
        seq = tuple(c.prompt_ids) + tuple(c.sampled_ids)
        for pos in range(len(seq)):
            p = seq[:pos + 1]
            decision = trainable and pos >= max(1, len(c.prompt_ids))
            if decision:
                owners.setdefault(p, set()).add(c.rollout_id)
            old = prefixes.get(p, (False, float("nan")))
            if decision and not old[0]:
                prefixes[p] = (True, c.logprobs[pos - len(c.prompt_ids)])
            else:
                prefixes.setdefault(p, old)
    return prefixes, inserted, merged, owners


def tree_prefixes(tree):
    flat = tree.flat()
    out = {}
    prefix_of: list[tuple] = []
    for q in range(len(flat)):
        parent = int(flat.parent_index[q])
        p = (prefix_of[parent] if parent >= 0 else ()) + (int(flat.tokens[q]),)
        prefix_of.append(p)
        assert p not in out, f"prefix {p} appears twice in the tree"
        out[p] = (bool(flat.decision[q]), float(flat.engine_logprobs[q]))
        assert flat.positions[q] == len(p) - 1
    return out, prefix_of


def check_structure(tree):
    for n in tree.nodes[1:]:
        parent = tree.nodes[n.parent]
        assert len(n) > 0
        assert n.start_pos == parent.end_pos
        assert n.depth == parent.depth + 1
        assert n.id in parent.children
        assert set(n.rollouts) <= set(parent.rollouts)
    for n in tree.nodes:
        firsts = [int(tree.nodes[c].tokens[0]) for c in n.children]
        assert len(firsts) == len(set(firsts)), "two children start with the same token"
        assert all(c > n.id for c in n.children), "not DFS pre-order"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(call_sets())
def test_every_call_token_on_exactly_one_path(data):
    calls, rollouts = data
    cfg = FilterConfig(prune=False, side_calls="train")
    tree = build_tree(calls, rollouts, cfg)
    check_structure(tree)
    expected, inserted, merged, owners = reference(calls, rollouts, cfg)
    got, order = tree_prefixes(tree)
    # the rollouts that sampled each token (their loss mask) hold for the whole node
    flat = tree.flat()
    for q, p in enumerate(order):
        node = tree.nodes[int(flat.node_index[q])]
        assert set(node.decision_rollouts) == owners.get(p, set()), p
    assert set(got) == set(expected)
    for p, (dec, lp) in expected.items():
        assert got[p][0] == dec, p
        if dec:
            assert np.isclose(got[p][1], lp), p
        else:
            assert np.isnan(got[p][1])
    assert tree.stats.merged_duplicates == merged
    assert tree.stats.unique_tokens == len(expected)
    assert tree.stats.decision_tokens == sum(d for d, _ in expected.values())
    # the path of every call reproduces its ids exactly
    ends = {cid: n.id for n in tree.nodes for cid in n.call_ends}
    for c in inserted:
        node = ends[c.call_id]
        chain = []
        while node > 0:
            chain.append(tree.nodes[node].tokens)
            node = tree.nodes[node].parent
        ids = np.concatenate(chain[::-1]).tolist()
        assert ids == list(c.prompt_ids) + list(c.sampled_ids)


@settings(max_examples=100, deadline=None)
@given(call_sets())
def test_pruned_tree_keeps_every_decision_and_only_kept_rollouts_decide(data):
    calls, rollouts = data
    tree = build_tree(calls, rollouts, FilterConfig(side_calls="train"))  # (side calls: test_call_classes.py)
    check_structure(tree)
    expected, _, _, _ = reference(calls, rollouts, FilterConfig(side_calls="train"))
    got, _ = tree_prefixes(tree)
    decisions = {p for p, (d, _) in expected.items() if d}
    assert decisions == {p for p, (d, _) in got.items() if d}
    assert set(got) <= set(expected)
    # every node has a decision token at or below it
    below = [bool(n.decision.any()) for n in tree.nodes]
    for n in reversed(tree.nodes):
        if n.parent >= 0:
            below[n.parent] |= below[n.id]
    assert all(below[1:])
    kept = set(tree.kept_rollouts())
    for n in tree.nodes:
        if n.decision.any():
            assert kept & set(n.rollouts), "a decision token with no kept rollout through it"


@settings(max_examples=60, deadline=None)
@given(call_sets())
def test_flat_packing_indices_match_ancestry(data):
    calls, rollouts = data
    tree = build_tree(calls, rollouts, FilterConfig(prune=False, side_calls="train"))
    flat = tree.flat()
    n = len(flat)
    ancestors = []
    for q in range(n):
        chain, k = {q}, int(flat.parent_index[q])
        while k >= 0:
            chain.add(k)
            k = int(flat.parent_index[k])
        ancestors.append(chain)
    for q in range(n):
        for k in range(n):
            allowed = k <= q < flat.subtree_end[k]
            assert allowed == (k in ancestors[q]), (q, k)


@settings(max_examples=60, deadline=None)
@given(call_sets())
def test_paths_cover_each_rollout(data):
    calls, rollouts = data
    tree = build_tree(calls, rollouts, FilterConfig(prune=False, side_calls="train"))
    for rid, info in tree.rollouts.items():
        for p in tree.paths_of(rid):
            assert p.rollout_id == rid
            assert all(rid in tree.nodes[n].rollouts for n in p.nodes)
            end = tree.nodes[p.end]
            assert not any(rid in tree.nodes[c].rollouts for c in end.children)
            assert len(tree.path_tokens(p)) == p.n_tokens
        if info.n_calls:
            assert info.paths


TURN = st.tuples(st.lists(st.integers(0, 50), min_size=1, max_size=5), st.lists(st.integers(0, 50), max_size=5))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 50), min_size=1, max_size=8), st.lists(TURN, min_size=1, max_size=6),
       st.integers(0, 3))
def test_linear_conversations_give_one_path(system, turns, n_dups):
    from tests.support.synthetic import conversation_calls

    calls = conversation_calls("a", system, turns)
    calls += [make_call("a", c.seq, c.prompt_ids, c.sampled_ids, call_id=f"dup{i}")
              for i, c in enumerate(calls[:n_dups])]
    tree = build_tree(calls, [make_rollout("a", 1.0)])
    assert len(tree.paths) == 1 and tree.stats.branches == 0
    assert tree.stats.merged_duplicates == min(n_dups, len(turns))
    last = calls[len(turns) - 1]
    assert tree.path_tokens(0).tolist() == last.prompt_ids + last.sampled_ids
    assert tree.stats.decision_tokens == sum(len(c) for c, _ in turns)


@settings(max_examples=100, deadline=None)
@given(st.lists(TURN, min_size=1, max_size=5), st.data())
def test_compaction_branches_at_the_cut(turns, data):
    from tests.support.synthetic import conversation_calls

    system = [100, 101, 102]
    calls = conversation_calls("a", system, turns)
    history = calls[-1].prompt_ids + calls[-1].sampled_ids
    cut = data.draw(st.integers(1, len(history) - 1))
    summary = [999] + data.draw(st.lists(st.integers(0, 50), max_size=4))  # 999 never occurs in history
    calls.append(make_call("a", len(calls), history[:cut] + summary, [7]))
    tree = build_tree(calls, [make_rollout("a", 1.0)], FilterConfig(prune=False, side_calls="train"))
    branch = [n for n in tree.nodes if n.branch_reason]
    assert len(branch) == 1 and branch[0].start_pos == cut
    assert branch[0].branch_reason in ("restart", "rewrite")
    assert tree.stats.branches == 1 and len(tree.paths) == 2
