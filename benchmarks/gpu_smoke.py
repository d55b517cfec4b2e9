"""GPU smoke test: flex_attention tree packing on CUDA, checked and timed (one GPU, < 8 min).

Needs only torch, transformers (and numpy); no vLLM, no download: the models are small
randomly initialised Llama-style configs. Two parts:

1. equivalence (fp32): a branching tree packed with the flex_attention tree mask (one chunk, and
   split into chunks with a recomputed ancestor path) gives the same per-token logprobs and the
   same gradients as running every root-to-leaf path alone as a causal sequence (SDPA), with the
   loss sum_paths a_path * sum_t logp(t);
2. speed and memory (bf16): one forward+backward of the same loss over a Claude-Code-shaped group
   (8 rollouts x 10 turns sharing a 10k-token prefix) three ways: tree-packed (flex tree mask),
   per-rollout (one causal sequence per rollout) and per-call (every call's prompt + completion
   as its own sequence). Wall time, peak CUDA memory and tokens computed.

    python benchmarks/gpu_smoke.py                       # on a CUDA machine, prints JSON + a table
    python benchmarks/gpu_smoke.py --device cpu --quick  # CPU dry run (SDPA tree mask, tiny sizes)

Exit code 1 when the equivalence check fails (the timings are still printed).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from harnessrl.train.packing import forest_from_paths, pack_forest, token_logprobs  # noqa: E402


def llama(hidden: int, layers: int, heads: int, kv_heads: int, inter: int, vocab: int, max_pos: int,
          dtype: torch.dtype, attn: str, device: torch.device, seed: int = 0):
    """A randomly initialised Llama-style causal LM."""
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                      num_key_value_heads=kv_heads, intermediate_size=inter, vocab_size=vocab,
                      max_position_embeddings=max_pos, tie_word_embeddings=False)
    cfg._attn_implementation = attn
    torch.manual_seed(seed)
    return LlamaForCausalLM(cfg).to(device=device, dtype=dtype)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# ---------------------------------------------------------------- groups

def agent_group(prefix: int, rollouts: int, turns: int, completion: tuple[int, int], observation: tuple[int, int],
                vocab: int, seed: int):
    """Claude-Code-shaped group: a shared prefix (system prompt + tools), then per rollout a linear
    conversation of `turns` (completion, tool result) pairs. Returns calls per rollout as
    (prompt ids, completion ids) and each rollout's full path."""
    rng = np.random.default_rng(seed)
    pre = rng.integers(3, vocab, prefix).tolist()
    calls, paths = [], []
    for _ in range(rollouts):
        hist, rc = list(pre), []
        for _ in range(turns):
            comp = rng.integers(3, vocab, int(rng.integers(*completion))).tolist()
            rc.append((list(hist), comp))
            hist += comp + rng.integers(3, vocab, int(rng.integers(*observation))).tolist()
        calls.append(rc)
        paths.append(hist)
    return calls, paths


def tree_weights(calls, paths, advantages: list[float]):
    """Forest of the paths, and the loss weight of every forest token: the summed advantage of the
    rollouts that sample it (0 for context tokens)."""
    forest, index = forest_from_paths(paths)
    w = np.zeros(len(forest), dtype=np.float64)
    for r, rc in enumerate(calls):
        for prompt, comp in rc:
            pos = np.arange(len(prompt), len(prompt) + len(comp))
            w[index[r][pos]] += advantages[r]
    return forest, index, w


# ---------------------------------------------------------------- the three training shapes

def tree_pass(model, forest, w: np.ndarray, budget: int, backend: str) -> tuple[torch.Tensor, int]:
    """Tree-packed forward+backward of sum_k w_k logp_k; returns (per-token logp [N], tokens computed)."""
    device = next(model.parameters()).device
    logp = torch.zeros(len(forest), dtype=torch.float64)
    n = 0
    for chunk in pack_forest(forest, budget):
        local = np.flatnonzero(chunk.owned.numpy() & (chunk.pred_pos.numpy() >= 0) & (w[chunk.index] != 0))
        n += len(chunk)
        if len(local) == 0:
            continue
        t = torch.as_tensor(local, dtype=torch.long)
        lp, _ = token_logprobs(model, chunk, t, torch.ones(len(local)), backend)
        (lp * torch.as_tensor(w[chunk.index[local]], dtype=lp.dtype, device=device)).sum().backward()
        logp[torch.as_tensor(chunk.index[local])] = lp.detach().double().cpu()
    return logp, n


def seq_pass(model, ids: list[int], targets: np.ndarray, weights: np.ndarray) -> torch.Tensor:
    """Causal forward+backward of one sequence: sum_j weights_j logp(ids[targets_j]); returns logp."""
    device = next(model.parameters()).device
    x = torch.as_tensor(ids, dtype=torch.long, device=device)[None]
    tg = torch.as_tensor(targets, dtype=torch.long, device=device)
    out = model(input_ids=x, logits_to_keep=tg - 1, use_cache=False)
    lp = torch.log_softmax(out.logits[0].float(), -1).gather(1, x[0, tg][:, None])[:, 0]
    (lp * torch.as_tensor(weights, dtype=lp.dtype, device=device)).sum().backward()
    return lp.detach().double().cpu()


def per_rollout_pass(model, calls, paths, advantages) -> tuple[list[torch.Tensor], int]:
    out = []
    for r, rc in enumerate(calls):
        tg = np.concatenate([np.arange(len(p), len(p) + len(c)) for p, c in rc])
        out.append(seq_pass(model, paths[r], tg, np.full(len(tg), advantages[r])))
    return out, sum(len(p) for p in paths)


def per_call_pass(model, calls, advantages) -> int:
    n = 0
    for r, rc in enumerate(calls):
        for prompt, comp in rc:
            tg = np.arange(len(prompt), len(prompt) + len(comp))
            seq_pass(model, prompt + comp, tg, np.full(len(tg), advantages[r]))
            n += len(prompt) + len(comp)
    return n


def grads(model) -> dict[str, torch.Tensor]:
    return {k: p.grad.detach().double().cpu().clone() for k, p in model.named_parameters() if p.grad is not None}


# ---------------------------------------------------------------- 1. equivalence

def equivalence(device: torch.device, backend: str, quick: bool) -> dict:
    """fp32: tree-packed (1 chunk and several chunks) vs per-path logprobs and gradients."""
    vocab = 512
    calls, paths = agent_group(prefix=96 if quick else 700, rollouts=3 if quick else 5, turns=3 if quick else 4,
                               completion=(8, 24) if quick else (20, 80), observation=(8, 24) if quick else (20, 120),
                               vocab=vocab, seed=1)
    adv = [1.0, -0.5, 0.25, -1.0, 0.75][: len(calls)]
    forest, index, w = tree_weights(calls, paths, adv)
    attn = "flex_attention" if backend == "flex" else "sdpa"
    model = llama(128, 2, 4, 2, 256, vocab, 8192, torch.float32, attn, device)
    ref = llama(128, 2, 4, 2, 256, vocab, 8192, torch.float32, "sdpa", device)
    ref.load_state_dict(model.state_dict())

    ref.zero_grad(set_to_none=True)
    path_lp, _ = per_rollout_pass(ref, calls, paths, adv)
    g_ref = grads(ref)
    res: dict = {"tree_tokens": len(forest), "path_tokens": sum(len(p) for p in paths)}
    ok = True
    longest = max(len(p) for p in paths)  # chunks recompute their ancestor path: own >= 48 tokens each
    for name, budget in (("one_chunk", len(forest) + 1), ("chunked", longest + 48)):
        model.zero_grad(set_to_none=True)
        tree_lp, _ = tree_pass(model, forest, w, budget, backend)
        g = grads(model)
        lp_err = 0.0
        for r, rc in enumerate(calls):
            tg = np.concatenate([np.arange(len(p), len(p) + len(c)) for p, c in rc])
            lp_err = max(lp_err, float((tree_lp[torch.as_tensor(index[r][tg])] - path_lp[r]).abs().max()))
        g_err = max(float((g[k] - g_ref[k]).abs().max() / (g_ref[k].abs().max() + 1e-12)) for k in g_ref)
        n_chunks = len(pack_forest(forest, budget))
        passed = lp_err < 1e-4 and g_err < 1e-3 and set(g) == set(g_ref)
        ok &= passed
        res[name] = {"chunks": n_chunks, "max_abs_logp_diff": lp_err, "max_rel_grad_diff": g_err, "ok": passed}
    res["ok"] = ok
    return res


# ---------------------------------------------------------------- 2. speed and memory

def measure(fn, device: torch.device) -> dict:
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
    sync(device)
    t0 = time.perf_counter()
    n = fn()
    sync(device)
    out = {"seconds": round(time.perf_counter() - t0, 3), "tokens_computed": int(n)}
    if device.type == "cuda":
        out["peak_gib_above_weights"] = round((torch.cuda.max_memory_allocated(device) - base) / 2**30, 2)
    return out


def speed(device: torch.device, backend: str, quick: bool, deadline: float) -> dict:
    vocab = 32000
    if quick:
        shape = dict(prefix=256, rollouts=2, turns=3, completion=(16, 48), observation=(16, 64))
        dims = dict(hidden=128, layers=2, heads=4, kv_heads=2, inter=256)
    else:
        shape = dict(prefix=10_000, rollouts=8, turns=10, completion=(50, 400), observation=(100, 800))
        dims = dict(hidden=1024, layers=8, heads=16, kv_heads=8, inter=2816)
    calls, paths = agent_group(**shape, vocab=vocab, seed=2)
    adv = [(-1.0) ** r * (0.5 + 0.1 * r) for r in range(len(calls))]
    forest, _, w = tree_weights(calls, paths, adv)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    attn = "flex_attention" if backend == "flex" else "sdpa"
    max_len = max(len(p) for p in paths) + 16
    tree_model = llama(**dims, vocab=vocab, max_pos=max(max_len, len(forest)) + 16, dtype=dtype, attn=attn,
                       device=device)
    seq_model = llama(**dims, vocab=vocab, max_pos=max(max_len, len(forest)) + 16, dtype=dtype, attn="sdpa",
                      device=device)
    seq_model.load_state_dict(tree_model.state_dict())
    n_params = sum(p.numel() for p in tree_model.parameters())
    res: dict = {"shape": shape, "model": {**dims, "vocab": vocab, "params_m": round(n_params / 1e6, 1),
                                           "dtype": str(dtype)},
                 "tree_tokens": len(forest), "path_tokens": sum(len(p) for p in paths),
                 "call_tokens": sum(len(p) + len(c) for rc in calls for p, c in rc)}

    def run(name: str, fn, model) -> None:
        if time.monotonic() > deadline:
            res[name] = {"skipped": "time budget spent"}
            return
        try:
            model.zero_grad(set_to_none=True)
            fn()  # warm-up (flex_attention compiles; kernels autotune)
            model.zero_grad(set_to_none=True)
            res[name] = measure(fn, device)
        except torch.OutOfMemoryError as err:  # a shape that does not fit is a result too
            res[name] = {"error": f"OOM: {str(err)[:200]}"}
        except Exception as err:  # noqa: BLE001 - record and go on to the next shape
            res[name] = {"error": f"{type(err).__name__}: {str(err)[:300]}"}
        model.zero_grad(set_to_none=True)

    # A chunk recomputes its first token's ancestor path, so a budget below the longest path
    # degenerates into one-token chunks: split at twice the longest path (a few chunks).
    budgets = [len(forest) + 1, 2 * max_len]
    for b in budgets:
        run(f"tree_{backend}_budget_{b}", lambda b=b: tree_pass(tree_model, forest, w, b, backend)[1], tree_model)
    run("per_rollout_causal", lambda: per_rollout_pass(seq_model, calls, paths, adv)[1], seq_model)
    run("per_call_causal", lambda: per_call_pass(seq_model, calls, adv), seq_model)
    return res


def table(res: dict) -> str:
    rows = [(k, v) for k, v in res.items() if isinstance(v, dict) and ("seconds" in v or "error" in v
                                                                      or "skipped" in v)]
    tree = next((v for k, v in rows if k.startswith("tree_") and "seconds" in v), None)
    lines = ["| method | tokens computed | fwd+bwd (s) | x tree | peak GiB above weights |", "|---|---:|---:|---:|---:|"]
    for k, v in rows:
        if "seconds" not in v:
            lines.append(f"| {k} | - | {v.get('error') or v.get('skipped')} | - | - |")
            continue
        x = v["seconds"] / tree["seconds"] if tree else float("nan")
        lines.append(f"| {k} | {v['tokens_computed']:,} | {v['seconds']:.2f} | {x:.2f} | "
                     f"{v.get('peak_gib_above_weights', '-')} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--quick", action="store_true", help="tiny sizes (CPU dry run / CI)")
    ap.add_argument("--budget-s", type=float, default=420.0, help="stop starting new timings after this")
    ap.add_argument("--out", default=None, help="also write the JSON result here")
    args = ap.parse_args()
    t_start = time.monotonic()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("no CUDA device: run with --device cpu --quick for a dry run", file=sys.stderr)
        return 2
    backend = "flex" if device.type == "cuda" else "sdpa"  # flex_attention has no backward on CPU
    import transformers

    out: dict = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "device": str(device),
                 "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
                 "torch": torch.__version__, "transformers": transformers.__version__, "backend": backend}
    t0 = time.monotonic()
    out["equivalence"] = equivalence(device, backend, args.quick)
    out["equivalence"]["seconds"] = round(time.monotonic() - t0, 1)
    print(json.dumps({"equivalence": out["equivalence"]}, indent=1), flush=True)
    out["speed"] = speed(device, backend, args.quick, t_start + args.budget_s)
    out["total_seconds"] = round(time.monotonic() - t_start, 1)
    print(json.dumps(out, indent=1))
    print(table(out["speed"]))
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1))
    return 0 if out["equivalence"]["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
