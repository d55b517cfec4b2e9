"""bf16 compute over fp32 master weights (train/precision.py): the trainer computes with the weights
a bf16 engine serves, the gradient lands on the fp32 masters, and the sync sends those weights."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from harnessrl.train.losses import PPOSettings
from harnessrl.train.packing import pack_forest, token_logprobs
from harnessrl.train.precision import compute_weights, dtype_of, served_weights
from harnessrl.train.settings import resolve_compute_dtype
from harnessrl.train.trainer import Trainer, chunk_targets

from .helpers import branching_paths, tiny_llama
from .test_trainer import make_batch, per_path_loss

BF16 = torch.bfloat16


def rounded_copy(model):
    """An independent model with bf16 parameters holding bf16(W): what a bf16 engine loads after a sync."""
    out = tiny_llama(0)
    for p in out.parameters():
        p.data = p.data.to(BF16)
    out.load_state_dict({k: v.to(BF16) for k, v in model.state_dict().items()})
    return out


def test_compute_weights_casts_every_parameter_and_restores_them():
    model = tiny_llama(1)
    model.config.tie_word_embeddings = True
    model.tie_weights()
    before = {name: p for name, p in model.named_parameters(remove_duplicate=False)}
    with compute_weights(model, BF16):
        inside = dict(model.named_parameters(remove_duplicate=False))
        assert all(t.dtype == BF16 for t in inside.values())
        assert all(torch.equal(inside[n], p.detach().to(BF16)) for n, p in before.items())
        assert inside["lm_head.weight"] is inside["model.embed_tokens.weight"]  # tied: one cast
    after = dict(model.named_parameters(remove_duplicate=False))
    assert all(after[n] is p and p.dtype == torch.float32 for n, p in before.items())


def test_compute_weights_restores_the_parameters_after_an_error():
    model = tiny_llama(1)
    with pytest.raises(RuntimeError), compute_weights(model, BF16):
        raise RuntimeError("boom")
    assert all(isinstance(p, torch.nn.Parameter) and p.dtype == torch.float32 for p in model.parameters())


@pytest.mark.parametrize("budget", [4096, 12])
def test_bf16_update_is_the_gradient_of_the_rounded_model_on_the_fp32_masters(budget):
    """Over one chunk or many (one cast per epoch, backpropagated chunk after chunk), the gradient
    the masters get is the per-path gradient of the bf16-rounded model computed in bf16."""
    paths = branching_paths(3, n_paths=5)
    adv = [1.0, -0.5, 0.25, -1.0, 0.75]
    forest, idx, batch, decision = make_batch(paths, adv)
    pol = tiny_llama(3)
    ref = rounded_copy(pol)
    per_path_loss(ref, paths, idx, adv, decision, 0.8).backward()
    before = {k: v.detach().clone() for k, v in pol.named_parameters()}
    opt = torch.optim.SGD(pol.parameters(), lr=1.0)
    tr = Trainer(pol, opt, PPOSettings(is_mode="tis", is_cap=2.0), token_budget=budget, grad_clip=1e9,
                 compute_dtype=BF16)
    stats = tr.update(batch)
    assert budget > len(forest) or stats.chunks > 1
    ref_grads = dict(ref.named_parameters())
    for name, p in pol.named_parameters():
        assert p.dtype == torch.float32
        delta = before[name] - p.detach()
        want = ref_grads[name].grad.float()
        # bf16 arithmetic on both sides, in a different order: compare at bf16 precision
        assert torch.allclose(delta, want, atol=2e-3, rtol=5e-2), name
        assert float((delta - want).norm()) <= 0.05 * float(want.norm()) + 1e-4, name


def test_small_updates_accumulate_on_the_masters_not_in_the_rounded_copy():
    """An Adam step far below a bf16 rounding step moves every fp32 master and (almost) no bf16 copy:
    the trainer still computes with exactly what a synced bf16 engine holds."""
    paths = branching_paths(5, n_paths=4)
    _, _, batch, _ = make_batch(paths, [1.0, -1.0, 0.5, -0.5])
    pol = tiny_llama(5)
    w0 = pol.model.layers[0].mlp.up_proj.weight.detach().clone()
    tr = Trainer(pol, torch.optim.AdamW(pol.parameters(), lr=1e-6, weight_decay=0.0), PPOSettings(),
                 token_budget=4096, compute_dtype=BF16)
    tr.update(batch)
    w1 = pol.model.layers[0].mlp.up_proj.weight.detach()
    assert w1.dtype == torch.float32 and float((w1 != w0).float().mean()) > 0.9
    assert float((w1.to(BF16) != w0.to(BF16)).float().mean()) < 0.1


class RecordingEngine:
    def __init__(self):
        self.weights: dict[str, torch.Tensor] = {}
        self.version = 0

    def update_weights(self, named, version):
        self.weights, self.version = dict(named), version


def test_sync_sends_the_weights_the_trainer_computes_with():
    """The synced tensors are bf16(W), and a bf16 model holding them scores tokens bit for bit as
    the trainer's bf16 compute does (the trainer's logprobs are the served policy's)."""
    paths = branching_paths(9, n_paths=4)
    forest, _, batch, _ = make_batch(paths, [1.0, -1.0, 0.5, -0.5])
    pol = tiny_llama(9)
    tr = Trainer(pol, torch.optim.AdamW(pol.parameters(), lr=1e-3), PPOSettings(), token_budget=4096,
                 compute_dtype=BF16)
    tr.update(batch)
    engine = RecordingEngine()
    tr.sync_weights(engine, 1)
    assert engine.version == 1
    state = pol.state_dict()
    assert all(t.dtype == BF16 and torch.equal(t, state[k].to(BF16)) for k, t in engine.weights.items())
    served = tiny_llama(0)
    for prm in served.parameters():  # bf16 parameters; buffers (RoPE's inv_freq) fp32, as vLLM keeps them
        prm.data = prm.data.to(BF16)
    served.load_state_dict(engine.weights)
    (chunk,) = pack_forest(forest, 4096)
    tg = chunk_targets(chunk, batch)
    with torch.no_grad():
        with compute_weights(pol, BF16):
            ours, _ = token_logprobs(pol, chunk, tg.local, tg.temperature)
        theirs, _ = token_logprobs(served, chunk, tg.local, tg.temperature)
    assert torch.equal(ours, theirs)


def test_fp32_sync_is_unchanged():
    pol = tiny_llama(2)
    out = dict(served_weights(pol.state_dict().items(), None))
    assert all(t.dtype == torch.float32 for t in out.values())


def test_old_logprobs_and_lora_reference_compute_in_bf16():
    """epochs > 1 (an old-logprob pass) with a LoRA policy whose reference is its base: runs under
    the cast, and the gradient reaches the fp32 adapters."""
    pytest.importorskip("peft")
    from harnessrl.train.weights import apply_lora

    paths = branching_paths(4, n_paths=4)
    _, _, batch, _ = make_batch(paths, [1.0, -1.0, 0.5, -0.5])
    pol = apply_lora(tiny_llama(4), r=4, alpha=8, dropout=0.0, target_modules=["q_proj", "v_proj"])
    params = [p for p in pol.parameters() if p.requires_grad]
    before = [p.detach().clone() for p in params]
    tr = Trainer(pol, torch.optim.AdamW(params, lr=1e-2), PPOSettings(kl_coef=0.1), token_budget=4096,
                 epochs=2, use_lora_reference=True, compute_dtype=BF16)
    stats = tr.update(batch)
    assert np.isfinite(stats.grad_norm) and stats.grad_norm > 0
    assert all(p.dtype == torch.float32 for p in params)
    assert any(not torch.equal(p.detach(), b) for p, b in zip(params, before))


@pytest.mark.parametrize(("setting", "weights", "engine", "want"), [
    ("auto", "float32", "bfloat16", "bfloat16"),
    ("auto", "float32", "float32", "float32"),
    ("auto", "float32", "float16", "float32"),
    ("auto", "float32", "auto", "float32"),
    ("float32", "float32", "bfloat16", "float32"),
    ("bfloat16", "float32", "float32", "bfloat16"),
    ("float32", "bfloat16", "bfloat16", "bfloat16"),  # never finer than the weights
])
def test_resolve_compute_dtype(setting, weights, engine, want):
    assert resolve_compute_dtype(setting, weights, engine) == want


def test_resolve_compute_dtype_refuses_an_unknown_setting():
    with pytest.raises(ValueError, match="compute_dtype"):
        resolve_compute_dtype("float8", "float32", "bfloat16")
    with pytest.raises(ValueError, match="unknown dtype"):
        dtype_of("bogus")


def test_run_config_resolves_compute_dtype_from_the_engine():
    from harnessrl.config import RunConfig
    from harnessrl.run.trainer_setup import compute_dtype

    bf16_engine = RunConfig.model_validate({"engine": {"type": "hf", "dtype": "bfloat16"}})
    assert bf16_engine.model.compute_dtype == "auto" and compute_dtype(bf16_engine) is BF16
    fp32_engine = RunConfig.model_validate({"engine": {"type": "hf", "dtype": "float32"}})
    assert compute_dtype(fp32_engine) is None
    forced = RunConfig.model_validate({"engine": {"type": "hf", "dtype": "bfloat16"},
                                       "model": {"compute_dtype": "float32"}})
    assert compute_dtype(forced) is None


def test_sampled_batch_shares_the_prompt_and_centres_each_groups_advantages():
    """train/served_drift.py: one forest over the prompt + completion paths (a prompt once), the
    engine's logprobs on the sampled tokens only, GRPO advantages of +-1 within each prompt's group."""
    from harnessrl.engine.base import Generation
    from harnessrl.train.served_drift import sampled_batch

    prompts = [[5, 6, 7], [8, 9]]
    comps = [[10, 12], [11, 13, 15], [12, 14], [13]]  # 2 per prompt; all even ids (reward 1) or none (0)
    gens = [Generation(c, [-0.1 * (k + 1)] * len(c), "stop", 0) for k, c in enumerate(comps)]
    batch = sampled_batch(prompts, gens, group=2, temperature=0.7)
    assert len(batch) == 3 + 2 + 3 + 2 + 2 + 1 and batch.n_decision == 8
    ids = batch.forest.ids
    adv = batch.adv_pos + batch.adv_neg
    want = {10: (1, -0.1), 12: None, 11: (-1, -0.2), 13: None, 15: (-1, -0.2), 14: (1, -0.3)}
    for tok, exp in want.items():
        if exp is not None:
            (j,) = np.flatnonzero(ids == tok)
            assert batch.decision[j] and abs(adv[j] - exp[0]) < 1e-4 and abs(batch.engine_logp[j] - exp[1]) < 1e-6
    assert not batch.decision[np.isin(ids, [5, 6, 7, 8, 9])].any()
    assert float(np.abs(batch.engine_logp[~batch.decision]).max()) == 0.0
    assert np.allclose(batch.temperature, 0.7) and float(batch.weight.sum()) == 8.0
