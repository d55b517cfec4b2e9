"""SFT on prefix trees (train/sft.py, sft/data.py): the packed loss and gradient equal per-call
cross-entropy on the sampled ids, and bad input (mixed tokenizers, no passing rollout) is refused."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
import torch

from harnessrl.train.losses import PPOSettings
from harnessrl.train.sft import _chunk_nll, sft_batch, sft_nll, token_weights
from harnessrl.train.trainer import Trainer
from harnessrl.tree.build import build_tree

from .helpers import tiny_llama
from .tree_fixtures import group_calls


def _group():
    """The fixture group plus a rollout whose first call repeats r0's (its sampled ids are shared
    by two rollouts: weight 2 on one tree token) and then goes on differently."""
    calls, rollouts = group_calls(seed=3, n=4)
    first = next(c for c in calls if c.rollout_id == "r0" and c.seq == 0)
    rng = random.Random(7)
    twin = replace(first, call_id="r9-c0", rollout_id="r9")
    nxt = list(first.prompt_ids) + list(first.sampled_ids) + [5, 6]
    calls += [twin, replace(first, call_id="r9-c1", rollout_id="r9", seq=1, prompt_ids=nxt,
                            sampled_ids=[rng.randrange(64) for _ in range(4)], logprobs=[-1.0] * 4,
                            prompt_provenance=[-1] * len(nxt))]
    rollouts.append(replace(rollouts[0], rollout_id="r9", sample_idx=9))
    return calls, rollouts


def _per_call_nll(model, calls):
    """Mean over every (call, sampled id) of -log p(id | the call's prompt and earlier sampled ids)."""
    total, n = 0.0, 0
    for c in calls:
        ids = list(c.prompt_ids) + list(c.sampled_ids)
        logits = model(input_ids=torch.tensor([ids])).logits[0].float()
        logp = torch.log_softmax(logits[len(c.prompt_ids) - 1:-1], -1)
        total = total - logp.gather(1, torch.tensor(c.sampled_ids)[:, None]).sum()
        n += len(c.sampled_ids)
    return total / n


@pytest.mark.parametrize("budget", [4096, 24])
def test_packed_sft_loss_and_gradient_equal_per_call_cross_entropy(budget):
    calls, rollouts = _group()
    tree = build_tree(calls, rollouts)
    assert token_weights(tree).max() == 2  # r0 and r9 sampled the same tokens: counted twice
    model = tiny_llama(seed=1)
    trainer = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.0), PPOSettings(is_mode="none"), budget)
    batch = sft_batch([tree])
    assert int(batch.weight.sum()) == sum(len(c.sampled_ids) for c in calls)

    packed = sft_nll(trainer, batch)
    model.zero_grad()
    _chunk_nll(trainer, batch, backward=True)
    packed_grads = [p.grad.clone() for p in model.parameters()]

    model.zero_grad()
    reference = _per_call_nll(model, calls)
    reference.backward()
    assert packed == pytest.approx(float(reference.detach()), rel=1e-5)
    for g, p in zip(packed_grads, model.parameters()):
        torch.testing.assert_close(g, p.grad, rtol=1e-4, atol=1e-6)


def test_sft_update_lowers_the_loss():
    from harnessrl.train.sft import sft_update

    calls, rollouts = _group()
    batch = sft_batch([build_tree(calls, rollouts)])
    model = tiny_llama(seed=2)
    trainer = Trainer(model, torch.optim.AdamW(model.parameters(), lr=1e-2), PPOSettings(is_mode="none"), 4096)
    before = sft_nll(trainer, batch)
    for _ in range(5):
        stats = sft_update(trainer, batch)
    assert stats["tokens_trained"] > 0
    assert sft_nll(trainer, batch) < before - 0.1


# -- data selection and refusals ------------------------------------------------------------------

@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from harnessrl.engine.model import smollm2_tokenizer_dir

    return AutoTokenizer.from_pretrained(smollm2_tokenizer_dir())


def _store(tmp_path, name, calls, rollouts, tokenizers):
    from harnessrl.store import RunStore

    store = RunStore(tmp_path / name)
    store.insert_calls(calls)
    for r in rollouts:
        store.put_rollout(r)
    store.set_meta("tokenizers", tokenizers)
    return store


def test_mixed_or_foreign_tokenizers_are_refused(tmp_path, tokenizer):
    from harnessrl.render.fingerprint import record_tokenizer, tokenizer_fingerprint
    from harnessrl.sft.data import SFTDataError, check_tokenizers

    own = {"fingerprint": tokenizer_fingerprint(tokenizer), "name": "smollm2"}
    other = {"fingerprint": "0123456789abcdef", "name": "Qwen/Qwen3-0.6B"}
    calls, rollouts = _group()
    mixed = _store(tmp_path, "mixed", calls, rollouts, [own, other])
    foreign = _store(tmp_path, "foreign", calls, rollouts, [other])
    fine = _store(tmp_path, "fine", calls, rollouts, [])
    record_tokenizer(fine, tokenizer)
    record_tokenizer(fine, tokenizer)  # recorded once
    old = _store(tmp_path, "old", calls, rollouts, [])
    try:
        with pytest.raises(SFTDataError, match="mixes tokenizers .*smollm2, Qwen"):
            check_tokenizers({tmp_path / "mixed": mixed}, tokenizer)
        with pytest.raises(SFTDataError, match="another tokenizer \\(Qwen/Qwen3-0.6B\\)"):
            check_tokenizers({tmp_path / "fine": fine, tmp_path / "foreign": foreign}, tokenizer)
        assert fine.get_meta("tokenizers") == [{"fingerprint": own["fingerprint"], "name": tokenizer.name_or_path}]
        assert check_tokenizers({tmp_path / "fine": fine}, tokenizer) == []
        assert "no tokenizer recorded" in check_tokenizers({tmp_path / "old": old}, tokenizer)[0]
    finally:
        for s in (mixed, foreign, fine, old):
            s.close()


def test_rejection_takes_passing_rollouts_and_distill_every_call(tmp_path, tokenizer):
    from harnessrl.sft.data import SFTDataError, distill_trees, rejection_trees

    calls, rollouts = _group()  # r1 and r3 have reward 1; r0, r2, r9 reward 0
    store = _store(tmp_path, "run", calls, rollouts, [])
    try:
        data = rejection_trees(store)
        assert data.rollouts == 2 and data.trees[0].kept_rollouts() == ["r1", "r3"]
        assert data.sampled_tokens == sum(len(c.sampled_ids) for c in calls if c.rollout_id in ("r1", "r3"))
        everything = distill_trees(store)
        assert everything.rollouts == 5
        assert everything.sampled_tokens == sum(len(c.sampled_ids) for c in calls) - len(calls[0].sampled_ids)
        with pytest.raises(SFTDataError, match="no passing rollout .*reward >= 2.*--mode distill"):
            rejection_trees(store, min_reward=2.0)
        with pytest.raises(SFTDataError, match="no passing rollout .* through codex"):
            rejection_trees(store, harness="codex")
    finally:
        store.close()


def test_distill_trains_calls_without_rollout_records(tmp_path):
    """A serving run: calls under keys (and the /v1 route) with no rollout records."""
    from harnessrl.sft.data import distill_trees

    calls, _ = _group()
    store = _store(tmp_path, "serve", [replace(c, rollout_id="adhoc" if c.rollout_id == "r2" else c.rollout_id)
                                       for c in calls], [], [])
    try:
        data = distill_trees(store)
        assert data.rollouts == 5 and data.calls == len(calls) and len(data.trees) == 5  # one tree per rollout id
    finally:
        store.close()


def test_sft_cli_refuses_a_run_without_passing_rollouts(tmp_path):
    from typer.testing import CliRunner

    from harnessrl.app.main import app

    calls, rollouts = _group()
    store = _store(tmp_path, "run", calls, [replace(r, reward=0.0) for r in rollouts], [])
    store.close()
    res = CliRunner().invoke(app, ["sft", str(tmp_path / "run"), "--out", str(tmp_path / "out")])
    text = " ".join(res.output.split())  # rich wraps long lines
    assert res.exit_code == 2, res.output
    assert "sft refused" in text and "no passing rollout" in text and "Traceback" not in text
    res = CliRunner().invoke(app, ["sft", str(tmp_path / "nothing"), "--out", str(tmp_path / "out")])
    assert res.exit_code == 2 and "holds no run" in " ".join(res.output.split())


def test_groups_of_one_harness_pack_into_one_tree_with_the_same_loss():
    """harness_trees: two recorded groups of one harness become one tree whose shared prompt is
    stored once (fewer tokens), with the same SFT weights and the same mean cross-entropy."""
    from harnessrl.sft.data import SFT_FILTERS, SFTGroup, harness_trees

    calls, rollouts = _group()
    halves = [[r for r in rollouts if r.rollout_id in ids] for ids in (("r0", "r1"), ("r2", "r3", "r9"))]
    groups = [SFTGroup("h", rs, [c for c in calls if c.rollout_id in {r.rollout_id for r in rs}]) for rs in halves]
    apart = [build_tree(g.calls, g.rollouts, SFT_FILTERS) for g in groups]
    [packed] = harness_trees(groups)
    assert len(packed.flat().tokens) < sum(len(t.flat().tokens) for t in apart)
    assert sft_batch([packed]).weight.sum() == sft_batch(apart).weight.sum()
    model = tiny_llama(seed=2)
    trainer = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.0), PPOSettings(is_mode="none"), 4096)
    assert sft_nll(trainer, sft_batch([packed])) == pytest.approx(sft_nll(trainer, sft_batch(apart)), rel=1e-5)
    other = SFTGroup("other", groups[0].rollouts, groups[0].calls)
    assert len(harness_trees([groups[1], other])) == 2  # a tree per harness
