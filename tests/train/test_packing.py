"""Exactness of tree packing: logprobs and gradients equal running every path separately."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from harnessrl.train import packing
from harnessrl.train.packing import (
    Forest, ForestOrderError, dfs_layout, forest_from_paths, pack_forest, split_forest, token_logprobs,
)

from .helpers import branching_paths, tiny_llama


def path_logprobs(model, seq: list[int], temp: float) -> torch.Tensor:
    out = model(input_ids=torch.tensor([seq]))
    logp = torch.log_softmax(out.logits[0, :-1].float() / temp, -1)
    return logp.gather(1, torch.tensor(seq[1:])[:, None])[:, 0]


def packed_logprobs(model, forest: Forest, budget: int, temp: float, backend: str = "sdpa") -> dict[int, torch.Tensor]:
    out = {}
    for chunk in pack_forest(forest, budget):
        tgt = torch.nonzero(chunk.owned & (chunk.pred_pos >= 0))[:, 0]
        lp, _ = token_logprobs(model, chunk, tgt, torch.full((len(tgt),), temp), backend)
        for k, g in enumerate(chunk.index[tgt.numpy()]):
            out[int(g)] = lp[k]
    return out


# backend sdpa runs block_tree_attention: BLOCK 4 gives many blocks, most skipping key columns
ATTENTION = [("sdpa", 256), ("sdpa", 4), ("sdpa-dense", 256)]


@pytest.mark.parametrize("budget", [10_000, 24, 11])
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("backend,block", ATTENTION)
def test_logprobs_match_separate_paths(seed, budget, backend, block, monkeypatch):
    monkeypatch.setattr(packing, "BLOCK", block)
    model = tiny_llama(seed)
    paths = branching_paths(seed, n_paths=6)
    forest, idx = forest_from_paths(paths)
    assert len(forest) < sum(map(len, paths))  # shared tokens exist and are stored once
    with torch.no_grad():
        packed = packed_logprobs(model, forest, budget, temp=0.7, backend=backend)
        for seq, ix in zip(paths, idx):
            ref = path_logprobs(model, seq, 0.7)
            got = torch.stack([packed[int(g)] for g in ix[1:]])
            assert torch.max(torch.abs(got - ref)).item() <= 1e-4


@pytest.mark.parametrize("budget", [10_000, 13])
@pytest.mark.parametrize("backend,block", ATTENTION)
def test_gradients_match_separate_paths(budget, backend, block, monkeypatch):
    monkeypatch.setattr(packing, "BLOCK", block)
    paths = branching_paths(3, n_paths=5)
    forest, idx = forest_from_paths(paths)
    gen = torch.Generator().manual_seed(0)
    weights = [torch.rand(len(p) - 1, generator=gen) for p in paths]
    ref_model, model = tiny_llama(3), tiny_llama(3)
    loss = sum((w * path_logprobs(ref_model, p, 1.0)).sum() for p, w in zip(paths, weights))
    loss.backward()
    tok_w = torch.zeros(len(forest))  # per-token weight = sum of the weights of the paths through it
    for ix, w in zip(idx, weights):
        tok_w.index_add_(0, torch.as_tensor(ix[1:]), w)
    for chunk in pack_forest(forest, budget):
        tgt = torch.nonzero(chunk.owned & (chunk.pred_pos >= 0))[:, 0]
        lp, _ = token_logprobs(model, chunk, tgt, torch.ones(len(tgt)), backend)
        (lp * tok_w[torch.as_tensor(chunk.index)[tgt]]).sum().backward()
    for (name, a), (_, b) in zip(ref_model.named_parameters(), model.named_parameters()):
        assert torch.allclose(a.grad, b.grad, atol=1e-5, rtol=1e-4), name


def test_gradient_checkpointing_recomputes_with_the_same_tree_attention(monkeypatch):
    """A checkpointed layer recomputes its forward in backward: under model_attention it runs the
    block attention again (the ray-ranks scale run failed: 108 tensors saved in forward, 58 in recompute)."""
    from harnessrl.train.packing import model_attention

    monkeypatch.setattr(packing, "BLOCK", 4)
    paths = branching_paths(3, n_paths=5)
    forest, _ = forest_from_paths(paths)
    grads = []
    for checkpointing in (False, True):
        model = tiny_llama(3)
        model.train()
        if checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        for chunk in pack_forest(forest, 13):
            tgt = torch.nonzero(chunk.owned & (chunk.pred_pos >= 0))[:, 0]
            lp, _ = token_logprobs(model, chunk, tgt, torch.ones(len(tgt)), "sdpa")
            with model_attention(model, "sdpa"):
                lp.sum().backward()
        grads.append({k: p.grad.clone() for k, p in model.named_parameters()})
    for k, g in grads[0].items():
        assert torch.allclose(grads[1][k], g, atol=1e-6, rtol=1e-5), k


def test_block_attention_skips_keys_no_query_of_the_block_sees(monkeypatch):
    monkeypatch.setattr(packing, "BLOCK", 4)
    calls = []
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def spy(q, k, v, **kw):
        calls.append((q.shape[2], k.shape[2]))
        return sdpa(q, k, v, **kw)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", spy)
    model = tiny_llama(0)
    forest, _ = forest_from_paths([[1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 9, 10, 11, 12, 13, 14, 15, 16]])
    with torch.no_grad():
        packed_logprobs(model, forest, 10_000, temp=1.0)
    assert model.config._attn_implementation == "sdpa"  # restored after the forward
    n_layers = model.config.num_hidden_layers
    assert len(calls) == n_layers * 4  # 16 tokens: 4 blocks of 4 queries per layer
    # block 3 (queries 8..11: the second branch) sees the shared 2 tokens and its own, not 2..7
    assert calls[2] == (4, 2 + 4)
    with torch.no_grad():  # the dense backend: one call over every key
        packed_logprobs(model, forest, 10_000, temp=1.0, backend="sdpa-dense")
    assert calls[-1] == (16, 16)


def test_split_covers_every_token_once_and_prefers_node_starts():
    forest, _ = forest_from_paths(branching_paths(5, n_paths=8))
    chunks = split_forest(forest.parent, 20)
    owned = np.concatenate([ix[n:] for ix, n in chunks])
    assert np.array_equal(np.sort(owned), np.arange(len(forest)))
    assert len(chunks) > 1
    for ix, n in chunks:  # the recomputed prefix is exactly the ancestor path of the first owned token
        p, anc = forest.parent[ix[n]], []
        while p >= 0:
            anc.append(int(p))
            p = forest.parent[p]
        assert list(ix[:n]) == anc[::-1]


def test_split_under_a_long_shared_prefix_recomputes_it_a_bounded_number_of_times():
    """A harness's 3,000-token prompt shared by 8 rollouts of 3 calls (300 new tokens each), budget
    2,048: the prefix is longer than the budget, so each chunk recomputes it; the chunks must still
    own budget/2 tokens each (before, one chunk per node: the prefix recomputed ~50 times)."""
    trunk = list(range(3000))
    paths = [trunk + [10_000 + 1000 * r + t for t in range(300 * c)] for r in range(8) for c in (1, 2, 3)]
    forest, _ = forest_from_paths(paths)
    chunks = split_forest(forest.parent, 2048)
    owned = np.concatenate([ix[n:] for ix, n in chunks])
    assert np.array_equal(np.sort(owned), np.arange(len(forest)))
    computed = sum(len(ix) for ix, _ in chunks)
    unique = len(forest)  # 3000 + 8 x 900
    assert len(chunks) <= 2 + 2 * (unique - 3000) // 1024, len(chunks)
    assert computed <= unique + len(chunks) * 3900, (computed, unique)
    assert all(len(ix) <= 3000 + 900 + 1024 for ix, _ in chunks)  # path + owned tokens: bounded


def test_a_chunk_ends_at_a_tree_root_rather_than_recompute_the_next_tree_s_prompt():
    """Two demo-sized trees (a 400-token prompt, then 4 rollouts of 200 tokens), budget 2,048: the
    last node start that fits is a branch point of the second tree, after its prompt; a cut there
    recomputed the prompt in the next chunk (before 2026-12-07). The cut goes at the tree's root."""
    def tree(base: int) -> list[list[int]]:
        return [[base + t for t in range(400)] + [base + 1000 * (r + 1) + t for t in range(200)] for r in range(4)]

    forest, _ = forest_from_paths(tree(0) + tree(100_000))
    assert len(forest) == 2 * 1200
    chunks = split_forest(forest.parent, 2048)
    assert [n for _, n in chunks] == [0, 0]  # nothing recomputed
    assert chunks[1][0][0] == 1200 and sum(len(ix) for ix, _ in chunks) == len(forest)


def test_dfs_layout_rejects_split_subtrees():
    with pytest.raises(ForestOrderError):
        dfs_layout(np.array([-1, 0, 0, 1]))  # token 3's parent (1) was left already
    depth, tout = dfs_layout(np.array([-1, 0, 1, 0, 3]))
    assert depth.tolist() == [0, 1, 2, 1, 2] and tout.tolist() == [5, 3, 3, 5, 5]


def two_trees() -> tuple[Forest, int]:
    """Two prefix trees one after the other in one forest; the second tree's first token."""
    first, _ = forest_from_paths(branching_paths(1, n_paths=4))
    second, _ = forest_from_paths(branching_paths(2, n_paths=3))
    n = len(first)
    parent = np.concatenate([first.parent, np.where(second.parent >= 0, second.parent + n, -1)])
    return Forest(np.concatenate([first.ids, second.ids]), parent.astype(np.int64)), n


@pytest.mark.parametrize("budget", [10_000, 13])
def test_a_break_starts_a_chunk_and_changes_no_logprob(budget):
    forest, start = two_trees()
    model = tiny_llama(2)
    broken = pack_forest(forest, budget, breaks=[start])
    for chunk in broken:  # no chunk holds tokens of both trees
        assert chunk.index.max() < start or chunk.index.min() >= start
    owned = np.concatenate([c.index[c.owned.numpy()] for c in broken])
    assert sorted(owned.tolist()) == list(range(len(forest)))  # every token trained once
    assert [c.index.tolist() for c in pack_forest(forest, budget, breaks=[])] == \
        [c.index.tolist() for c in pack_forest(forest, budget)]
    with torch.no_grad():
        plain = packed_logprobs(model, forest, budget, temp=0.9)
        out = {}
        for chunk in broken:
            tgt = torch.nonzero(chunk.owned & (chunk.pred_pos >= 0))[:, 0]
            lp, _ = token_logprobs(model, chunk, tgt, torch.full((len(tgt),), 0.9))
            out.update({int(g): lp[k] for k, g in enumerate(chunk.index[tgt.numpy()])})
    assert out.keys() == plain.keys()
    assert max(abs(float(out[g] - plain[g])) for g in out) <= 1e-5


def test_a_break_inside_a_tree_is_refused():
    forest, start = two_trees()
    with pytest.raises(ForestOrderError, match="inside a tree"):
        pack_forest(forest, 10_000, breaks=[start + 3])
