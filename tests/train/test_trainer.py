"""A full tree-packed update equals training every path separately (same per-token weights)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from harnessrl.train import packing
from harnessrl.train.batch import TrainBatch
from harnessrl.train.losses import PPOSettings
from harnessrl.train.trainer import Trainer

from .helpers import branching_paths, path_fields, tiny_llama


def make_batch(paths, adv, temp=0.8):
    f = path_fields(paths, adv)
    n = len(f.forest)
    eng = np.full(n, -1.0, np.float32)
    return f.forest, f.idx, TrainBatch(
        forest=f.forest, decision=f.decision, temperature=np.full(n, temp, np.float32), engine_logp=eng,
        adv_pos=f.adv_pos, adv_neg=f.adv_neg, weight=f.weight, tree_offsets=np.array([0, n])), f.decision


def per_path_loss(model, paths, idx, adv, decision, temp):
    total, denom = 0.0, 0.0
    for seq, ix, a in zip(paths, idx, adv):
        out = model(input_ids=torch.tensor([seq]))
        lp = torch.log_softmax(out.logits[0, :-1] / temp, -1).gather(1, torch.tensor(seq[1:])[:, None])[:, 0]
        m = torch.as_tensor(decision[ix[1:]])
        ratio = torch.exp(lp - lp.detach())
        isw = torch.exp(lp.detach() + 1.0).clamp(max=2.0)  # TIS against engine logp = -1
        total = total - (ratio * a * isw * m).sum()
        denom += float(m.sum())
    return total / denom


@pytest.mark.parametrize("budget", [4096, 12])
@pytest.mark.parametrize("block", [256, 4])  # queries per block of the trainer's tree attention
def test_update_equals_per_path_training(budget, block, monkeypatch):
    monkeypatch.setattr(packing, "BLOCK", block)
    paths = branching_paths(7, n_paths=5)
    adv = [1.0, -0.5, 0.25, -1.0, 0.75]
    forest, idx, batch, decision = make_batch(paths, adv)
    ref, pol = tiny_llama(7), tiny_llama(7)
    per_path_loss(ref, paths, idx, adv, decision, 0.8).backward()
    opt = torch.optim.SGD(pol.parameters(), lr=1.0)
    before = {k: v.detach().clone() for k, v in pol.named_parameters()}
    tr = Trainer(pol, opt, PPOSettings(is_mode="tis", is_cap=2.0), token_budget=budget, grad_clip=1e9)
    m = tr.update(batch)
    for name, p in pol.named_parameters():
        delta = before[name] - p.detach()  # = grad for SGD lr=1
        assert torch.allclose(delta, dict(ref.named_parameters())[name].grad, atol=1e-5, rtol=1e-4), name
    assert m.tokens_computed >= m.unique_tree_tokens == len(forest)
    assert m.tokens_trained == float(decision.sum())
    if budget < len(forest):
        assert m.chunks > 1
