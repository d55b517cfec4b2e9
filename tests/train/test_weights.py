"""LoRA (peft): HF names for sync, merged checkpoints that plain transformers loads, adapters train."""

from __future__ import annotations

import pytest
import torch

from harnessrl.train.checkpoint import latest_checkpoint, save_checkpoint
from harnessrl.train.weights import apply_lora, hf_named_weights

from .helpers import tiny_llama


@pytest.mark.parametrize("tie", [False, True])
def test_lora_weights_merge_under_hf_names_and_checkpoint_loads(tmp_path, tie):
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    plain_names = set(tiny_llama(0, tie=tie).state_dict())
    model = apply_lora(tiny_llama(0, tie=tie), r=4, alpha=8, dropout=0.0, target_modules=["q_proj", "v_proj"])
    for name, p in model.named_parameters():  # make the adapters non-trivial
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.5)
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    weights = dict(hf_named_weights(model))
    assert set(weights) == plain_names
    x = torch.randint(0, 64, (1, 12))
    with torch.no_grad():
        want = model(input_ids=x).logits
    save_checkpoint(tmp_path, 3, model, {"optimizer": {}}, source_dir=None)
    step, ckpt = latest_checkpoint(tmp_path)
    assert step == 3 and not list(tmp_path.glob("checkpoints/*.tmp"))
    stored = set(load_file(str(ckpt / "policy" / "model.safetensors")))
    assert stored == plain_names - ({"lm_head.weight"} if tie else set())  # a tied matrix is stored once
    loaded = AutoModelForCausalLM.from_pretrained(ckpt / "policy")
    with torch.no_grad():
        assert torch.allclose(loaded(input_ids=x).logits, want, atol=1e-5)
    assert not any("lora" in k for k in loaded.state_dict())
    with torch.no_grad():  # unmerged again after the export: the live model is unchanged
        assert torch.allclose(model(input_ids=x).logits, want, atol=1e-6)


def test_lora_policy_update_with_kl_to_base():
    import numpy as np

    from harnessrl.train.batch import TrainBatch
    from harnessrl.train.losses import PPOSettings
    from harnessrl.train.packing import forest_from_paths
    from harnessrl.train.trainer import Trainer

    model = apply_lora(tiny_llama(1), r=4, alpha=8, dropout=0.0, target_modules=["q_proj", "v_proj"])
    forest, idx = forest_from_paths([[1, 2, 3, 4, 5, 6], [1, 2, 3, 9, 8, 7]])
    n = len(forest)
    dec = forest.parent >= 2
    batch = TrainBatch(forest=forest, decision=dec, temperature=np.ones(n, np.float32),
                       engine_logp=np.full(n, -4.0, np.float32), adv_pos=np.where(dec, 1.0, 0).astype(np.float32),
                       adv_neg=np.zeros(n, np.float32), weight=dec.astype(np.float32), tree_offsets=np.array([0, n]))
    params = [p for p in model.parameters() if p.requires_grad]
    tr = Trainer(model, torch.optim.AdamW(params, lr=0.05), PPOSettings(kl_coef=0.1), token_budget=64,
                 use_lora_reference=True)
    first = tr.update(batch)
    second = tr.update(batch)
    assert first.kl < 1e-6 < second.kl  # adapters start at zero (= the base), then move away
