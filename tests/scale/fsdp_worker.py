"""One rank of the FSDP2 trainer test (launched by torchrun from test_fsdp.py); also builds the
single-process reference. Every rank makes the same ShardedTrainer calls (update, weights,
checkpoint; the resume case then restores a fresh sharded trainer from that checkpoint and steps
again); rank 0 saves what it saw. Usage: torchrun --nproc-per-node 2 fsdp_worker.py OUT_DIR CASE"""

from __future__ import annotations

import dataclasses
import faulthandler
import os
import random
import sys

import numpy as np
import torch

CASES = ("full", "lora", "mis_epochs", "resume")


def tiny_llama(seed: int = 0, vocab: int = 64):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                      attn_implementation="sdpa", tie_word_embeddings=True)
    return LlamaForCausalLM(cfg).float()


def batch(seed: int = 3):
    from harnessrl.train.batch import TrainBatch
    from harnessrl.train.packing import forest_from_paths

    rng = random.Random(seed)
    paths = [[rng.randrange(64) for _ in range(rng.randint(12, 20))]]
    for _ in range(7):
        base = rng.choice(paths)
        cut = rng.randint(1, len(base) - 1)
        paths.append(base[:cut] + [rng.randrange(64) for _ in range(rng.randint(4, 14))])
    adv = [1.0, -0.5, 0.25, -1.0, 0.75, -0.25, 0.5, -0.75]
    forest, idx = forest_from_paths(paths)
    n = len(forest)
    decision = (forest.ids % 3 != 0) & (forest.parent >= 0)
    a_pos, a_neg, w = np.zeros(n, np.float32), np.zeros(n, np.float32), np.zeros(n, np.float32)
    for ix, a in zip(idx, adv):
        seen = ix[decision[ix]]
        w[seen] += 1.0
        (a_pos if a > 0 else a_neg)[seen] += a
    eng = np.where(decision, -4.2 + 0.3 * (forest.ids % 5 - 2), 0.0).astype(np.float32)  # ~log(1/64) +- 0.6
    return TrainBatch(forest=forest, decision=decision, temperature=np.full(n, 0.9, np.float32), engine_logp=eng,
                      adv_pos=a_pos, adv_neg=a_neg, weight=w, tree_offsets=np.array([0, n]))


def build(case: str, ranks=None, policy=None):
    """The trainer of a case (policy: the tiny llama, or the one given); shards when ranks is given.
    SGD lr=1 (the step is the gradient), but AdamW in the resume case (its state must come back),
    with eps=1e-3: at the default 1e-8 a first step is lr * g / |g|, so a gradient element near 0
    moves by up to lr on a rounding difference between 2 ranks and 1 process."""
    from harnessrl.train.losses import PPOSettings
    from harnessrl.train.trainer import Trainer
    from harnessrl.train.weights import apply_lora

    policy = tiny_llama(7) if policy is None else policy
    if case == "lora":
        policy = apply_lora(policy, r=4, alpha=8, dropout=0.0, target_modules=["q_proj", "v_proj", "up_proj"])
        torch.manual_seed(11)  # peft starts lora_B at 0: give B values so A gets a gradient too
        for name, p in policy.named_parameters():
            if "lora_B" in name:
                p.data.normal_(0, 0.05)
    if ranks is not None:
        from harnessrl.train.fsdp import shard_model

        shard_model(policy, ranks)
    params = [p for p in policy.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-2, eps=1e-3) if case == "resume" else torch.optim.SGD(params, lr=1.0)
    settings = PPOSettings(is_mode="mis", mis_low=0.8, mis_high=1.25) if case == "mis_epochs" else \
        PPOSettings(is_mode="tis", is_cap=2.0)
    epochs = 2 if case == "mis_epochs" else 1
    trainer = Trainer(policy, opt, settings, token_budget=40, grad_clip=1e9, epochs=epochs, ranks=ranks,
                      use_lora_reference=case == "lora")
    return trainer


def trainable(policy) -> dict[str, torch.Tensor]:
    out = {}
    for k, p in policy.named_parameters():
        if p.requires_grad:
            t = p.detach()
            out[k] = (t.full_tensor() if hasattr(t, "full_tensor") else t).clone()
    return out


def main(out_dir: str, case: str) -> None:
    from pathlib import Path

    from transformers import AutoModelForCausalLM

    from harnessrl.train.checkpoint import load_trainer_state
    from harnessrl.train.fsdp import ShardedTrainer, init_ranks

    ranks = init_ranks("gloo")
    st = ShardedTrainer(build(case, ranks), ranks)
    before = trainable(st.trainer.policy)
    metrics = dataclasses.asdict(st.update(batch()))
    weights = dict(st.named_weights())
    ckpt = st.save_checkpoint(Path(out_dir) / "run", 1, None, keep=2)
    after = trainable(st.trainer.policy)
    out = {"metrics": metrics, "before": before, "after": after, "weights": weights, "world": ranks.world,
           "ckpt": str(ckpt)}
    if case == "resume":  # a fresh sharded trainer from the checkpoint takes the second step
        again = ShardedTrainer(build(case, ranks, AutoModelForCausalLM.from_pretrained(ckpt / "policy")), ranks)
        again.restore(load_trainer_state(ckpt))
        again.update(batch(5))
        out["resumed"] = dict(again.named_weights())
    if ranks.rank == 0:
        torch.save(out, f"{out_dir}/rank0.pt")
    st.close()


if __name__ == "__main__":
    faulthandler.enable()  # a rank that aborts (SIGABRT in gloo) prints where it was
    main(sys.argv[1], sys.argv[2])
    # Every result is written and the group is closed: skip interpreter teardown, where a gloo
    # group still referenced by a dead module can abort the rank (a CI run: SIGABRT after the results)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
