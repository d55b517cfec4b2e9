"""Training speed: one forward+backward over the same Claude-Code-shaped group, three ways.

- tree:        the group's prefix tree packed (tree mask, path positions), every token once, attention
               per block of queries over the keys the block sees (train/packing.py block_tree_attention)
- tree-dense:  the same, attention as one SDPA call over the dense L x L tree mask (before 2026-12-04)
- per-rollout: each rollout's calls merged into one sequence (one causal forward per rollout)
- per-call:    every call's prompt + completion as its own sequence (what a call-level trainer does)

The same decision tokens get the same loss weights in all three. Reports tokens computed, wall
time and this process's CPU seconds (median of --repeats), for each `--compute-dtype`: float32, or
bfloat16 compute over the fp32 weights (train/precision.py `compute_weights`, what
`model.compute_dtype` does under a bf16 engine). The group comes from
tests/support/synthetic.claude_code_group; counts at the full Claude Code shape (8 x 10 turns, 10k
prefix) are printed from the tree stats alone.

    .venv/bin/python benchmarks/train_speed.py [--layers 6] [--prefix 2048] [--rollouts 4] [--turns 4]
        [--compute-dtype float32,bfloat16] [--methods tree,tree-dense,per-rollout,per-call]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch


def make_model(layers: int):
    """SmolLM2-135M's architecture (random weights; `layers` of its 30) in fp32 with SDPA."""
    from transformers import AutoConfig, AutoModelForCausalLM

    from harnessrl.engine import resolve_model

    cfg = AutoConfig.from_pretrained(resolve_model(None))
    cfg.num_hidden_layers = layers
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    if layers == 30:
        return AutoModelForCausalLM.from_pretrained(resolve_model(None), dtype=torch.float32,
                                                    attn_implementation="sdpa")
    return AutoModelForCausalLM.from_config(cfg, dtype=torch.float32).float()


def group(prefix: int, rollouts: int, turns: int, seed: int = 0):
    from harnessrl.algo import grpo
    from harnessrl.tree.build import build_tree
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/support: shared scaffolding
    from tests.support.synthetic import claude_code_group

    calls, rolls = claude_code_group(n_rollouts=rollouts, prefix_tokens=prefix, turns=turns,
                                     completion_tokens=(32, 96), observation_tokens=(32, 160), seed=seed)
    tree = build_tree(calls, rolls)
    return calls, tree, grpo(tree, std=False)


def tree_step(model, tree, adv, budget: int, backend: str = "sdpa") -> int:
    from harnessrl.train.batch import concat_batch
    from harnessrl.train.packing import pack_forest, token_logprobs
    from harnessrl.train.trainer import chunk_targets

    batch = concat_batch([tree.flat()], [adv])
    n = 0
    for chunk in pack_forest(batch.forest, budget):
        tg = chunk_targets(chunk, batch)
        lp, _ = token_logprobs(model, chunk, tg.local, tg.temperature, backend)
        (-(lp * (tg.adv_pos + tg.adv_neg))).sum().backward()
        n += len(chunk)
    return n


def seq_step(model, seqs: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> int:
    """Each (ids, decision mask, weight) as its own causal sequence."""
    n = 0
    for ids, dec, w in seqs:
        x = torch.as_tensor(ids, dtype=torch.long)[None]
        pos = torch.as_tensor(np.flatnonzero(dec[1:]))  # predict token t+1 from position t
        out = model(input_ids=x, logits_to_keep=pos)
        lp = torch.log_softmax(out.logits[0].float(), -1).gather(1, x[0, pos + 1][:, None])[:, 0]
        (-(lp * torch.as_tensor(w[pos + 1]))).sum().backward()
        n += len(ids)
    return n


def rollout_sequences(tree, adv):
    flat = tree.flat()
    a = adv.adv_pos + adv.adv_neg
    out = []
    for path in tree.paths:
        ix = np.concatenate([np.arange(flat.node_offsets[k], flat.node_offsets[k + 1]) for k in path.nodes])
        out.append((flat.tokens[ix], flat.decision[ix], a[ix]))
    return out


def call_sequences(calls, tree, adv):
    w = {}
    for rid in tree.kept_rollouts():
        sub = [c for c in calls if c.rollout_id == rid]
        n_dec = sum(len(c.sampled_ids) for c in sub)
        w[rid] = float(adv.rollout_adv[rid]) / max(n_dec, 1) if adv.rollout_adv else 1.0
    out = []
    for c in calls:
        ids = np.asarray(c.prompt_ids + c.sampled_ids)
        dec = np.zeros(len(ids), bool)
        dec[len(c.prompt_ids):] = True
        out.append((ids, dec, np.full(len(ids), w.get(c.rollout_id, 0.0), np.float32)))
    return out


def timed(fn, repeats: int, model, dtype: torch.dtype | None) -> tuple[int, float, float]:
    """(tokens computed, median wall s, median CPU s) of `fn` under `compute_weights(model, dtype)`."""
    from harnessrl.train.precision import compute_weights

    times, cpus, n = [], [], 0
    for _ in range(repeats):
        model.zero_grad(set_to_none=True)
        t0, c0 = time.perf_counter(), time.process_time()
        with compute_weights(model, dtype):
            n = fn()
        times.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return n, statistics.median(times), statistics.median(cpus)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--prefix", type=int, default=2048)
    ap.add_argument("--rollouts", type=int, default=4)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--budget", type=int, default=8192)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--compute-dtype", default="float32", help="comma-separated: float32, bfloat16")
    ap.add_argument("--methods", default="tree,tree-dense,per-rollout,per-call")
    args = ap.parse_args()
    torch.set_num_threads(2)

    _, big, _ = group(10_000, 8, 10)
    s = big.stats
    print(f"Claude-Code shape (8 rollouts x 10 turns, 10k prefix): unique {s.unique_tokens}, per-rollout "
          f"{s.per_rollout_tokens} ({s.per_rollout_tokens / s.unique_tokens:.1f}x), per-call {s.per_call_tokens} "
          f"({s.per_call_tokens / s.unique_tokens:.1f}x)")

    calls, tree, adv = group(args.prefix, args.rollouts, args.turns)
    model = make_model(args.layers)
    print(f"timed shape: {args.rollouts} rollouts x {args.turns} turns, prefix {args.prefix}; "
          f"model SmolLM2 arch, {args.layers} layers, fp32 weights, 2 threads")
    steps = {"tree": lambda: tree_step(model, tree, adv, args.budget),
             "tree-dense": lambda: tree_step(model, tree, adv, args.budget, "sdpa-dense"),
             "per-rollout": lambda: seq_step(model, rollout_sequences(tree, adv)),
             "per-call": lambda: seq_step(model, call_sequences(calls, tree, adv))}
    rows = [(dt, name, *timed(steps[name], args.repeats, model, None if dt == "float32" else getattr(torch, dt)))
            for dt in args.compute_dtype.split(",") for name in args.methods.split(",")]
    first = {dt: (n, t, c) for dt, name, n, t, c in reversed(rows)}  # each dtype's first method: the base
    print(f"{'compute':<9} {'method':<12} {'tokens':>8} {'x base':>7} {'fwd+bwd s':>10} {'x base':>7} "
          f"{'CPU s':>8} {'x base':>7} {'CPU ms/tok':>10}")
    for dt, name, n, t, c in rows:
        bn, bt, bc = first[dt]
        print(f"{dt:<9} {name:<12} {n:>8} {n / bn:>7.2f} {t:>10.2f} {t / bt:>7.2f} {c:>8.2f} {c / bc:>7.2f} "
              f"{1e3 * c / n:>10.2f}")
    dts = args.compute_dtype.split(",")
    if len(dts) == 2:
        for name in args.methods.split(","):
            (_, _, _, t0, c0), (_, _, _, t1, c1) = [r for r in rows if r[1] == name]
            print(f"{name}: {dts[0]} / {dts[1]}: wall {t0 / t1:.2f}x, CPU {c0 / c1:.2f}x")

if __name__ == "__main__":
    main()
