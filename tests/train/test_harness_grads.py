"""Per-harness policy gradients of a mixed batch: their cosine, and an unchanged optimizer step."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from harnessrl.train.batch import TrainBatch
from harnessrl.train.harness_grads import HarnessGradients, chunk_harness, gradient_agreement, harness_breaks
from harnessrl.train.losses import PPOSettings
from harnessrl.train.packing import Forest, pack_forest
from harnessrl.train.trainer import Trainer

from .helpers import branching_paths, path_fields, tiny_llama


def tree_arrays(paths: list[list[int]], adv: list[float]) -> dict[str, np.ndarray]:
    """One tree's forest and per-token fields (every path through a decision token adds its advantage)."""
    f = path_fields(paths, adv)
    return {"ids": f.forest.ids, "parent": f.forest.parent, "decision": f.decision, "adv_pos": f.adv_pos,
            "adv_neg": f.adv_neg, "weight": f.weight}


def mixed_batch(trees: list[tuple[str, list[list[int]], list[float]]]) -> TrainBatch:
    """A batch of (harness, paths, advantages) trees, in that order."""
    parts = [tree_arrays(paths, adv) for _, paths, adv in trees]
    sizes = [len(p["ids"]) for p in parts]
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    parent = np.concatenate([np.where(p["parent"] >= 0, p["parent"] + off, -1) for p, off in zip(parts, offsets)])

    def cat(key: str) -> np.ndarray:
        return np.concatenate([p[key] for p in parts])

    n = int(offsets[-1])
    return TrainBatch(forest=Forest(cat("ids"), parent.astype(np.int64)), decision=cat("decision"),
                      temperature=np.full(n, 0.8, np.float32), engine_logp=np.full(n, -1.0, np.float32),
                      adv_pos=cat("adv_pos"), adv_neg=cat("adv_neg"), weight=cat("weight"), tree_offsets=offsets,
                      tree_harness=[h for h, _, _ in trees])


def sgd_trainer(seed: int, budget: int, split: bool = True) -> Trainer:
    pol = tiny_llama(seed)
    return Trainer(pol, torch.optim.SGD(pol.parameters(), lr=1.0), PPOSettings(is_mode="tis", is_cap=2.0),
                   token_budget=budget, grad_clip=1e9, harness_grad_cosine=split)


PATHS = branching_paths(3, n_paths=4)
ADV = [1.0, -0.5, 0.25, -1.0]
PAIR = "claude-code:tiny|codex:small"


@pytest.mark.parametrize("budget", [4096, 12])  # one chunk holding both trees / many chunks
def test_identical_data_under_two_harnesses_has_cosine_one(budget):
    batch = mixed_batch([("codex:small", PATHS, ADV), ("claude-code:tiny", PATHS, ADV)])
    stats = sgd_trainer(1, budget).update(batch)
    assert stats.grad_cosine is not None and set(stats.grad_cosine) == {PAIR}
    assert stats.grad_cosine[PAIR] == pytest.approx(1.0, abs=1e-4)
    norms = stats.harness_grad_norm or {}
    assert norms["codex:small"] == pytest.approx(norms["claude-code:tiny"], rel=1e-4)
    assert norms["codex:small"] == pytest.approx(stats.grad_norm / 2, rel=1e-4)  # the total is their sum


@pytest.mark.parametrize("budget", [4096, 12])
def test_opposite_advantages_on_identical_data_have_cosine_minus_one(budget):
    batch = mixed_batch([("codex:small", PATHS, ADV), ("claude-code:tiny", PATHS, [-a for a in ADV])])
    stats = sgd_trainer(1, budget).update(batch)
    assert stats.grad_cosine is not None
    assert stats.grad_cosine[PAIR] == pytest.approx(-1.0, abs=1e-4)
    assert stats.grad_norm < 1e-3 * (stats.harness_grad_norm or {})["codex:small"]  # they cancel


@pytest.mark.parametrize("budget", [4096, 12])
def test_the_optimizer_step_is_the_one_without_the_split(budget):
    other = branching_paths(5, n_paths=3)
    # harness a twice, not together: its gradient is collected in two parts
    batch = mixed_batch([("a", PATHS, ADV), ("b", other, [0.5, -1.0, 1.0]), ("a", other, [1.0, 0.2, -0.3])])
    split, plain = sgd_trainer(2, budget), sgd_trainer(2, budget, split=False)
    before = {k: v.detach().clone() for k, v in split.policy.named_parameters()}
    s_split, s_plain = split.update(batch), plain.update(batch)
    assert s_plain.grad_cosine is None and s_split.grad_cosine is not None and "a|b" in s_split.grad_cosine
    moved = 0.0
    for (name, p), q in zip(split.policy.named_parameters(), plain.policy.parameters()):
        assert torch.allclose(p, q, atol=1e-6, rtol=1e-5), name
        moved = max(moved, float((p.detach() - before[name]).abs().max()))
    assert moved > 1e-4  # the step did something
    assert s_split.loss == pytest.approx(s_plain.loss, rel=1e-5)
    assert s_split.tokens_trained == s_plain.tokens_trained
    assert s_split.entropy == pytest.approx(s_plain.entropy, rel=1e-5)
    assert s_split.grad_norm == pytest.approx(s_plain.grad_norm, rel=1e-5)


def test_a_single_harness_batch_records_nothing():
    one = sgd_trainer(1, 4096).update(mixed_batch([("codex:small", PATHS, ADV), ("codex:small", PATHS, ADV)]))
    assert one.grad_cosine is None and one.harness_grad_norm is None
    unknown = mixed_batch([("a", PATHS, ADV), ("b", PATHS, ADV)])
    unknown.tree_harness = None
    assert sgd_trainer(1, 4096).update(unknown).grad_cosine is None
    sharded = sgd_trainer(1, 4096)
    sharded.ranks = SimpleNamespace(rank=0, world=2)  # FSDP: no rank holds a harness's whole gradient
    assert sharded._token_harness(mixed_batch([("a", PATHS, ADV), ("b", PATHS, ADV)])) is None


def test_harness_codes_of_the_batch_tokens():
    batch = mixed_batch([("b", PATHS, ADV), ("a", PATHS[:2], ADV[:2])])
    names, codes = batch.harness_codes()
    n_first = int(batch.tree_offsets[1])
    assert names == ["a", "b"] and len(codes) == len(batch)
    assert set(codes[:n_first]) == {1} and set(codes[n_first:]) == {0}


def test_breaks_where_the_trees_change_harness_and_a_chunk_of_two_harnesses_is_refused():
    assert harness_breaks(np.asarray([0, 5, 9, 14, 20]), ["a", "a", "b", "a"]) == [9, 14]
    assert harness_breaks(np.asarray([0, 5, 9]), ["a", "a"]) == []
    assert chunk_harness(np.asarray(["b", "b"], dtype=object)) == "b"
    assert chunk_harness(np.asarray([], dtype=object)) is None
    with pytest.raises(ValueError, match="several harnesses"):
        chunk_harness(np.asarray(["a", "b"], dtype=object))


def count_backwards(model: torch.nn.Module) -> list[int]:
    """A counter of backward passes through the model's output projection."""
    n = [0]
    model.get_output_embeddings().register_full_backward_hook(lambda *_: n.__setitem__(0, n[0] + 1))
    return n


@pytest.mark.parametrize("budget", [4096, 40, 12])  # the whole batch fits one chunk / a few trees a chunk / many chunks
def test_the_split_runs_one_backward_per_chunk_and_no_chunk_mixes_harnesses(budget):
    other = branching_paths(5, n_paths=3)
    batch = mixed_batch([("a", PATHS, ADV), ("a", other, [0.5, -1.0, 1.0]), ("b", other, [1.0, 0.2, -0.3]),
                         ("b", PATHS, [-a for a in ADV])])
    trainer = sgd_trainer(3, budget)
    backwards = count_backwards(trainer.policy)
    stats = trainer.update(batch)
    assert stats.grad_cosine is not None and "a|b" in stats.grad_cosine
    assert backwards[0] == stats.chunks  # before 2026-12-07 a chunk of both harnesses ran two
    plain = sgd_trainer(3, budget, split=False)
    plain_backwards = count_backwards(plain.policy)
    s_plain = plain.update(batch)
    assert s_plain.chunks == plain_backwards[0]
    assert stats.chunks <= s_plain.chunks + 1  # the break at the one change of harness adds one at most
    if budget >= len(batch):  # a break at a tree's root recomputes no prefix
        assert stats.tokens_computed == s_plain.tokens_computed == len(batch)
    breaks = harness_breaks(batch.tree_offsets, batch.tree_harness or [])
    names, codes = batch.harness_codes()
    for chunk in pack_forest(batch.forest, budget, breaks):
        assert len(set(codes[chunk.index].tolist())) == 1


def test_gradient_parts_are_the_differences_between_switches():
    w = torch.nn.Parameter(torch.zeros(3))
    split = HarnessGradients([w])
    for harness, g in (("a", [1.0, 0.0, 0.0]), ("b", [0.0, 2.0, 0.0]), ("a", [1.0, 0.0, 1.0])):
        split.switch(harness)
        (w * torch.tensor(g)).sum().backward()
    split.finish()
    assert [t.tolist() for t in split.parts["a"]] == [[2.0, 0.0, 1.0]]
    assert [t.tolist() for t in split.parts["b"]] == [[0.0, 2.0, 0.0]]
    assert w.grad is not None and w.grad.tolist() == [2.0, 2.0, 1.0]  # what the optimizer sees is untouched
    cosine, norms = gradient_agreement(split.parts)
    assert cosine == {"a|b": 0.0} and norms["b"] == 2.0
    assert gradient_agreement({"a": [torch.ones(2)], "b": [torch.zeros(2)]})[0] == {}  # a zero gradient: no cosine
    # per parameter: the cosine and norms of the concatenated gradients
    a, b = [torch.tensor([1.0, 2.0]), torch.tensor([[3.0]])], [torch.tensor([2.0, 0.0]), torch.tensor([[-1.0]])]
    cos, norm = gradient_agreement({"a": a, "b": b})
    assert norm["a"] == pytest.approx(14 ** 0.5) and cos["a|b"] == pytest.approx(-1 / (14 ** 0.5 * 5 ** 0.5))
