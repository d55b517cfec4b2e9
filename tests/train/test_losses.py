"""PPO clipping on shared tokens (A+ / A- form vs per-path), dual clip, TIS / MIS, KL, value loss."""

from __future__ import annotations

import pytest
import torch

from harnessrl.train.losses import PPOSettings, importance_weights, kl_k3, policy_loss, value_loss


def per_path_objective(ratio, path_adv, s: PPOSettings):
    clipped = ratio.clamp(1 - s.clip_low, 1 + s.clip_high)
    total = 0
    for a in path_adv:  # each path trains the shared token with its own advantage
        obj = torch.minimum(ratio * a, clipped * a)
        if s.dual_clip is not None:
            obj = torch.where(a < 0, torch.maximum(obj, s.dual_clip * a), obj)
        total = total + obj
    return total


@pytest.mark.parametrize("dual", [None, 3.0])
def test_shared_token_clip_equals_per_path(dual):
    gen = torch.Generator().manual_seed(0)
    n_tok, n_paths = 200, 5
    s = PPOSettings(dual_clip=dual, is_mode="none")
    path_adv = torch.randn(n_paths, n_tok, generator=gen)
    logp = (torch.randn(n_tok, generator=gen) * 0.5).requires_grad_()
    old = torch.zeros(n_tok)
    ratio = torch.exp(logp)
    ref = -per_path_objective(ratio, path_adv, s).sum()
    (g_ref,) = torch.autograd.grad(ref, logp)
    a_pos, a_neg = path_adv.clamp(min=0).sum(0), path_adv.clamp(max=0).sum(0)
    got = policy_loss(logp, old, old, a_pos, a_neg, torch.full((n_tok,), float(n_paths)), s)
    (g_got,) = torch.autograd.grad(got.loss, logp)
    assert torch.allclose(got.loss, ref, atol=1e-5)
    assert torch.allclose(g_got, g_ref, atol=1e-5)
    # summing advantages before clipping is NOT the same (the caveat the A+/A- form fixes)
    naive = -per_path_objective(ratio, path_adv.sum(0, keepdim=True), s).sum()
    assert abs(naive.item() - ref.item()) > 1e-3
    assert got.sums.clip_frac > 0


def test_truncated_is_caps_and_scales():
    old = torch.log(torch.tensor([0.5, 0.5, 0.5]))
    eng = torch.log(torch.tensor([0.5, 0.1, 0.4]))  # ratios 1, 5, 1.25
    w, keep = importance_weights(old, eng, PPOSettings(is_mode="tis", is_cap=2.0))
    assert torch.allclose(w, torch.tensor([1.0, 2.0, 1.25])) and keep.all()
    logp = old.clone().requires_grad_()
    parts = policy_loss(logp, old, eng, torch.ones(3), torch.zeros(3), torch.ones(3), PPOSettings(is_cap=2.0))
    (g,) = torch.autograd.grad(parts.loss, logp)
    assert torch.allclose(g, -torch.tensor([1.0, 2.0, 1.25]))  # d/dlogp of -r*A*w at r=1


def test_masked_is_drops_tokens():
    old = torch.log(torch.tensor([0.5, 0.5]))
    eng = torch.log(torch.tensor([0.45, 0.05]))
    w, keep = importance_weights(old, eng, PPOSettings(is_mode="mis"))
    assert keep.tolist() == [True, False]
    parts = policy_loss(old.clone().requires_grad_(), old, eng, torch.ones(2), torch.zeros(2), torch.ones(2),
                        PPOSettings(is_mode="mis"))
    assert parts.sums.is_kept == 1.0


def test_kl_k3_nonnegative_and_zero_at_equal():
    a, b = torch.randn(50), torch.randn(50)
    assert (kl_k3(a, b) >= 0).all() and torch.allclose(kl_k3(a, a), torch.zeros(50))


def test_value_loss_on_shared_token_equals_per_path():
    v = torch.tensor([0.3], requires_grad=True)
    path_returns, path_w = torch.tensor([1.0, 0.0, 0.5]), torch.tensor([1.0, 2.0, 0.5])
    ref = (path_w * (v - path_returns) ** 2).sum()
    (g_ref,) = torch.autograd.grad(ref, v)
    mean_r = (path_w * path_returns).sum() / path_w.sum()
    (g,) = torch.autograd.grad(value_loss(v, mean_r[None], path_w.sum()[None]), v)
    assert torch.allclose(g, g_ref)


def test_mismatch_kl_estimates_kl_engine_to_trainer():
    """k3 on engine samples: non-negative per token and, averaged, KL(engine || trainer) of the distributions."""
    from harnessrl.train.losses import mismatch_kl

    torch.manual_seed(0)
    engine = torch.log_softmax(torch.randn(6), -1)
    trainer = torch.log_softmax(engine + 0.3 * torch.randn(6), -1)
    exact = float((engine.exp() * (engine - trainer)).sum())
    x = torch.multinomial(engine.exp(), 200_000, replacement=True)
    est = mismatch_kl(trainer[x], engine[x])
    assert (est >= 0).all() and abs(float(est.mean()) - exact) < 0.1 * exact
    assert float(mismatch_kl(engine, engine).abs().max()) == 0.0
    old = torch.log(torch.tensor([0.5, 0.5, 0.5]))
    eng = torch.log(torch.tensor([0.5, 0.1, 0.4]))  # TIS ratios 1, 5, 1.25: one capped at 2
    parts = policy_loss(old.clone(), old, eng, torch.ones(3), torch.zeros(3), torch.ones(3), PPOSettings(is_cap=2.0))
    assert parts.sums.is_capped == 1.0 and parts.sums.mismatch_kl > 0
