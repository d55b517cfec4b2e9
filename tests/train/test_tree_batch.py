"""Real prefix trees (tree.build_tree) + algo advantages -> packed update == per-rollout training;
GAE with the critic: values once per tree token, critic gradient == per-path training."""

from __future__ import annotations

import numpy as np
import torch

from harnessrl.algo import gae, grpo
from harnessrl.train.batch import concat_batch
from harnessrl.train.critic import ValueModel, forest_values
from harnessrl.train.losses import PPOSettings
from harnessrl.train.trainer import Trainer
from harnessrl.tree.build import build_tree

from .helpers import tiny_llama
from .tree_fixtures import group_calls


def path_flat_index(tree, path):
    flat = tree.flat()
    return np.concatenate([np.arange(flat.node_offsets[n], flat.node_offsets[n + 1]) for n in path.nodes])


def reference_grpo_loss(model, tree, adv):
    flat = tree.flat()
    total = 0.0
    for rid in tree.kept_rollouts():
        got = {}
        for path in tree.paths_of(rid):
            ix = path_flat_index(tree, path)
            out = model(input_ids=torch.as_tensor(flat.tokens[ix], dtype=torch.long)[None])
            lp = torch.log_softmax(out.logits[0, :-1] / torch.as_tensor(flat.temperature[ix[1:]])[:, None], -1)
            lp = lp.gather(1, torch.as_tensor(flat.tokens[ix[1:]], dtype=torch.long)[:, None])[:, 0]
            for k, q in enumerate(ix[1:]):
                if flat.decision[q]:
                    got.setdefault(int(q), lp[k])  # a rollout trains each of its tree tokens once
        for q, lp in got.items():
            a, w = [(a, w) for r, _, a, w in adv.token_contributions(q) if r == rid][0]
            isw = torch.exp(lp.detach() - float(flat.engine_logprobs[q])).clamp(max=2.0)
            total = total - w * a * torch.exp(lp - lp.detach()) * isw
    return total / adv.norm


def test_grpo_update_on_built_tree_equals_per_rollout_training():
    calls, rollouts = group_calls(seed=1)
    tree = build_tree(calls, rollouts)
    assert len(tree.paths) > len(rollouts)  # the compaction made a branch
    adv = grpo(tree)
    ref, pol = tiny_llama(11), tiny_llama(11)
    reference_grpo_loss(ref, tree, adv).backward()
    batch = concat_batch([tree.flat()], [adv])
    opt = torch.optim.SGD(pol.parameters(), lr=1.0)
    before = {k: v.detach().clone() for k, v in pol.named_parameters()}
    Trainer(pol, opt, PPOSettings(is_cap=2.0), token_budget=24, grad_clip=1e9).update(batch)
    for name, p in pol.named_parameters():
        g = dict(ref.named_parameters())[name].grad
        assert torch.allclose(before[name] - p.detach(), g, atol=1e-5, rtol=1e-4), name


def tiny_critic(seed: int):
    from transformers import LlamaModel

    torch.manual_seed(seed)
    backbone = LlamaModel(tiny_llama(seed).config)
    critic = ValueModel(backbone, backbone.config.hidden_size)
    torch.nn.init.normal_(critic.head.weight, std=0.5)
    return critic


def test_gae_critic_values_once_per_token_and_exact_value_gradient():
    calls, rollouts = group_calls(seed=2)
    tree = build_tree(calls, rollouts)
    flat = tree.flat()
    critic, ref = tiny_critic(5), tiny_critic(5)
    values = forest_values(critic, concat_batch([flat], [grpo(tree)]).forest, budget=20)
    # each path's own forward gives the same value at every token (shared tokens computed once)
    for path in tree.paths:
        ix = path_flat_index(tree, path)
        with torch.no_grad():
            v = ref.head(ref.backbone(input_ids=torch.as_tensor(flat.tokens[ix], dtype=torch.long)[None])
                         .last_hidden_state[0])[:, 0]
        assert np.allclose(values[ix[1:]], v[:-1].numpy(), atol=1e-5)
    adv = gae(tree, values, gamma=1.0, lam=0.9)
    batch = concat_batch([flat], [adv])
    assert batch.returns is not None
    # reference: every (path, token) contribution trained on its own path
    loss = 0.0
    rows = np.repeat(np.arange(adv.n_tokens), np.diff(adv.ptr))
    for path in tree.paths:
        ix = path_flat_index(tree, path)
        v = ref.head(ref.backbone(input_ids=torch.as_tensor(flat.tokens[ix], dtype=torch.long)[None])
                     .last_hidden_state[0])[:, 0]
        pos = {int(q): k for k, q in enumerate(ix)}
        for j in np.flatnonzero(adv.path == path.index):
            q = int(rows[j])
            loss = loss + float(adv.weight[j]) * (v[pos[q] - 1] - float(adv.returns[j])) ** 2
    (loss / float(batch.value_weight.sum())).backward()
    pol = tiny_llama(5)
    copt = torch.optim.SGD(critic.parameters(), lr=1.0)
    before = {k: p.detach().clone() for k, p in critic.named_parameters()}
    tr = Trainer(pol, torch.optim.SGD(pol.parameters(), lr=0.0), PPOSettings(), token_budget=20, grad_clip=1e9,
                 critic=critic, critic_optimizer=copt)
    m = tr.update(batch)
    assert m.value_loss is not None
    for name, p in critic.named_parameters():
        g = dict(ref.named_parameters())[name].grad
        assert torch.allclose(before[name] - p.detach(), g, atol=1e-5, rtol=1e-4), name
