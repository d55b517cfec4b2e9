"""The cost of one `Trainer.update` on a demo-sized two-harness batch, with candidates on and off.

The trainer is the one `make demo` builds (configs/demo.yaml through run/trainer_setup.py: the
default model SmolLM2-135M-Instruct, its dtype, AdamW, algorithm.token_budget, the attention
backend), the batch one demo step: two harnesses' trees put together by harness, as the loop does
(run/loop.py `harness_ordered`). By default the trees are synthetic (tests/support/synthetic.py,
`--trees-per-harness` groups per harness of `--rollouts` rollouts x `--turns` calls under a
`--prefix`-token prompt: ~4,400 tree tokens, ~1,100 trained, the size of the demo's first step);
`--run-dir RUN --step N` trains on the trees a finished run trained at step N instead.
`--run-dir RUN --count` times nothing: per trained step of the run, the chunks, tokens computed and
backward passes the trainer needs now, next to the tokens computed and chunks the run recorded.

Each candidate is a pair of settings (a / b) of the same trainer, timed alternately in one process
(a b, b a, a b, ...; `--repeats` pairs), so a neighbour's load falls on both. Printed per setting:
median wall and this process's CPU seconds of the update, its forward+backward and optimizer
seconds, ms of wall per computed and per trained token, and the ratio b / a of the medians and of
each pair. Candidates (`--candidates`):

- cosine:    algorithm.harness_grad_cosine on / off (the per-harness gradient split, train/harness_grads.py)
- threads:   torch threads 2 / 1
- budget:    algorithm.token_budget as configured / twice that
- fused:     AdamW as the run builds it / AdamW(fused=True)
- attention: tree attention per block of queries ("sdpa") / one dense SDPA call ("sdpa-dense")

    .venv/bin/python benchmarks/update_cost.py [--candidates cosine,threads] [--repeats 3] [--threads N]
        [--config configs/demo.yaml] [--run-dir RUN --step N] [--layers 30] [--json out.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
HARNESSES = ("claude-code:tiny", "codex:small")


def synthetic_trees(harnesses: tuple[str, ...], per_harness: int, rollouts: int, turns: int, prefix: int,
                    seed: int) -> list:
    """`per_harness` Claude-Code-shaped groups per harness (every group's rewards mixed)."""
    from harnessrl.tree.build import build_tree
    sys.path.insert(0, str(ROOT))  # tests/support: shared scaffolding
    from tests.support.synthetic import claude_code_group

    trees = []
    for h, harness in enumerate(harnesses):
        for g in range(per_harness):
            gid = f"{harness}-g{g}"
            calls, rolls = claude_code_group(n_rollouts=rollouts, prefix_tokens=prefix, turns=turns,
                                             completion_tokens=(12, 40), observation_tokens=(16, 64),
                                             seed=seed + 100 * h + g, group_id=gid)
            rolls = [dataclasses.replace(r, harness=harness, reward=float(i % 2)) for i, r in enumerate(rolls)]
            trees.append(build_tree(calls, rolls))
    return trees


def run_trees(run_dir: str, step: int) -> list:
    """The trees a finished run trained at `step`, rebuilt from its store."""
    from harnessrl.algo.views import trained_pairs
    from harnessrl.tree.run_trees import open_store

    return [tree for tree, _ in trained_pairs(open_store(run_dir), step)]


def demo_batch(cfg, trees: list):
    """The step's batch as the loop builds it: advantages of the configured estimator, each
    harness's trees together, one TrainBatch."""
    from harnessrl.algo.estimator import estimate, per_harness_share
    from harnessrl.run.loop import harness_ordered
    from harnessrl.train.batch import concat_batch

    advs = [estimate(t, cfg.algorithm) for t in trees]
    if cfg.algorithm.per_harness_loss:
        advs = per_harness_share(trees, advs)
    trees, advs = harness_ordered(trees, advs)
    return concat_batch([t.flat() for t in trees], advs, harnesses=[t.harness for t in trees])


def demo_trainer(cfg, layers: int):
    """The run's trainer (run/trainer_setup.py) over the default model; `layers` < 30: its first layers."""
    from harnessrl.engine import resolve_model
    from harnessrl.run.trainer_setup import build_trainer, load_policy

    model_dir = Path(resolve_model(cfg.model.path))
    policy = load_policy(cfg, model_dir)
    if layers < len(policy.model.layers):
        policy.model.layers = policy.model.layers[:layers]
        policy.config.num_hidden_layers = layers
    return build_trainer(cfg, policy, model_dir)


Setter = Callable[[object, str], None]  # (trainer, "a" | "b"): put the trainer in that setting


def candidates(cfg) -> dict[str, tuple[str, str, Setter]]:
    budget = cfg.algorithm.token_budget
    fused: dict[str, torch.optim.Optimizer] = {}

    def cosine(tr, which):
        tr.harness_grad_cosine = which == "a"

    def threads(tr, which):
        torch.set_num_threads(2 if which == "a" else 1)

    def budget_(tr, which):
        tr.token_budget = budget if which == "a" else 2 * budget

    def fused_(tr, which):
        if "a" not in fused:
            fused["a"] = tr.optimizer
            o = cfg.optimizer
            fused["b"] = torch.optim.AdamW([p for p in tr.policy.parameters() if p.requires_grad], lr=o.lr,
                                           weight_decay=o.weight_decay, betas=tuple(o.betas), fused=True)
        tr.optimizer = fused[which]

    def attention(tr, which):
        tr.backend = "sdpa" if which == "a" else "sdpa-dense"

    return {"cosine": ("harness_grad_cosine on", "off", cosine),
            "threads": ("2 threads", "1 thread", threads),
            "budget": (f"token_budget {budget}", f"{2 * budget}", budget_),
            "fused": ("AdamW (the run's)", "AdamW fused", fused_),
            "attention": ("block tree attention", "dense SDPA", attention)}


def count_steps(cfg, run_dir: str) -> None:
    """Per trained step of a finished run: what the update packs now (chunks, tokens computed,
    backward passes: one per chunk and harness in it) against what the run recorded."""
    from harnessrl.algo.trained import trained_steps
    from harnessrl.train.harness_grads import harness_breaks
    from harnessrl.train.packing import pack_forest
    from harnessrl.train.trainer import chunk_targets

    recorded = {}
    for line in (Path(run_dir) / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        if "tokens_computed" in row:
            recorded[row["step"]] = row
    print("| step | trees | tree tokens | trained tokens | recorded: chunks, tokens computed | now: chunks, tokens "
          "computed, backward passes |")
    print("|---:|---:|---:|---:|---:|---:|")
    total = [0, 0, 0]
    for step in trained_steps(run_dir):
        trees = run_trees(run_dir, step)
        batch = demo_batch(cfg, trees)
        _, codes = batch.harness_codes()
        two = cfg.algorithm.harness_grad_cosine and len(set(batch.tree_harness or [])) > 1
        breaks = harness_breaks(batch.tree_offsets, batch.tree_harness or []) if two else []
        chunks = pack_forest(batch.forest, cfg.algorithm.token_budget, breaks)
        backwards = 0
        for c in chunks:
            local = chunk_targets(c, batch).local.numpy()
            backwards += len(set(codes[c.index[local]].tolist())) if two else int(len(local) > 0)
        computed = sum(len(c) for c in chunks)
        rec = recorded.get(step, {})
        total = [total[0] + len(batch), total[1] + int(rec.get("tokens_computed", 0)), total[2] + computed]
        print(f"| {step} | {len(trees)} | {len(batch)} | {int(batch.decision.sum())} | "
              f"{rec.get('chunks', 0):.0f}, {rec.get('tokens_computed', 0):.0f} | {len(chunks)}, {computed}, {backwards} |")
    print(f"tree tokens {total[0]}; tokens computed: recorded {total[1]} ({total[1] / total[0]:.3f}x), "
          f"now {total[2]} ({total[2] / total[0]:.3f}x)")


def backward_counter(model) -> list[int]:
    """How many backward passes went through the model's output projection (one per chunk and
    harness piece)."""
    n = [0]
    model.get_output_embeddings().register_full_backward_hook(lambda *_: n.__setitem__(0, n[0] + 1))
    return n


def timed_update(trainer, batch, backwards: list[int]) -> dict:
    n0 = backwards[0]
    t0, c0 = time.perf_counter(), time.process_time()
    stats = trainer.update(batch)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"wall_s": wall, "cpu_s": cpu, "fwd_bwd_s": stats.forward_backward_s or 0.0,
            "optimizer_s": stats.optimizer_s or 0.0, "tokens_computed": stats.tokens_computed,
            "tokens_trained": stats.tokens_trained, "chunks": stats.chunks, "backwards": backwards[0] - n0, "loss": stats.loss,
            "grad_norm": stats.grad_norm, "grad_cosine": stats.grad_cosine}


def compare(trainer, batch, backwards: list[int], name: str, label_a: str, label_b: str, setter: Setter,
            repeats: int) -> list[dict]:
    """`repeats` pairs of updates, a then b, then b then a, ...; one warm-up update first."""
    rows = []
    setter(trainer, "a")
    timed_update(trainer, batch, backwards)  # warm-up: first-call allocations, lazy inits
    for r in range(repeats):
        for which in ("a", "b") if r % 2 == 0 else ("b", "a"):
            setter(trainer, which)
            row = {"candidate": name, "setting": which, "label": label_a if which == "a" else label_b, "pair": r,
                   **timed_update(trainer, batch, backwards)}
            rows.append(row)
            print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}), flush=True)
    setter(trainer, "a")
    return rows


def summary(rows: list[dict]) -> None:
    print("\n| candidate | setting | backwards | update wall s | CPU s | fwd+bwd s | optimizer s "
          "| wall ms / computed token | wall ms / trained token | b / a wall (CPU), medians | b / a wall per pair |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for name in dict.fromkeys(r["candidate"] for r in rows):
        mine = [r for r in rows if r["candidate"] == name]
        med = {}
        for which in ("a", "b"):
            rs = [r for r in mine if r["setting"] == which]
            med[which] = {k: statistics.median(r[k] for r in rs) for k in
                          ("wall_s", "cpu_s", "fwd_bwd_s", "optimizer_s", "tokens_computed", "tokens_trained",
                           "backwards")}
        pairs = sorted({r["pair"] for r in mine})
        per_pair = [next(r["wall_s"] for r in mine if r["pair"] == p and r["setting"] == "b")
                    / next(r["wall_s"] for r in mine if r["pair"] == p and r["setting"] == "a") for p in pairs]
        for which in ("a", "b"):
            m = med[which]
            label = next(r["label"] for r in mine if r["setting"] == which)
            ratio = (f"{med['b']['wall_s'] / med['a']['wall_s']:.2f} ({med['b']['cpu_s'] / med['a']['cpu_s']:.2f})"
                     if which == "b" else "")
            pp = ", ".join(f"{x:.2f}" for x in per_pair) if which == "b" else ""
            print(f"| {name} | {label} | {m['backwards']:.0f} | {m['wall_s']:.2f} | {m['cpu_s']:.2f} | {m['fwd_bwd_s']:.2f} | "
                  f"{m['optimizer_s']:.2f} | {1e3 * m['wall_s'] / max(m['tokens_computed'], 1):.2f} | "
                  f"{1e3 * m['wall_s'] / max(m['tokens_trained'], 1):.2f} | {ratio} | {pp} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default=str(ROOT / "configs" / "demo.yaml"))
    ap.add_argument("--candidates", default="cosine", help="comma-separated: cosine,threads,budget,fused,attention")
    ap.add_argument("--repeats", type=int, default=3, help="pairs of updates per candidate")
    ap.add_argument("--layers", type=int, default=30, help="the model's first layers only (30: all of SmolLM2-135M)")
    ap.add_argument("--trees-per-harness", type=int, default=2)
    ap.add_argument("--rollouts", type=int, default=6)
    ap.add_argument("--turns", type=int, default=2)
    ap.add_argument("--prefix", type=int, default=350)
    ap.add_argument("--run-dir", default=None, help="train on the trees this run trained at --step instead")
    ap.add_argument("--step", type=int, default=1)
    ap.add_argument("--count", action="store_true", help="with --run-dir: count chunks and tokens per step, time nothing")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default, one per core, as a run has)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    from harnessrl.config import load_config

    cfg = load_config(args.config)
    if args.count:
        if not args.run_dir:
            raise SystemExit("--count needs --run-dir")
        count_steps(cfg, args.run_dir)
        return
    if args.threads:
        torch.set_num_threads(args.threads)
    trees = (run_trees(args.run_dir, args.step) if args.run_dir else
             synthetic_trees(HARNESSES, args.trees_per_harness, args.rollouts, args.turns, args.prefix, args.seed))
    batch = demo_batch(cfg, trees)
    torch.manual_seed(args.seed)
    trainer = demo_trainer(cfg, args.layers)
    print(f"batch: {len(trees)} trees of {sorted({t.harness for t in trees})}, {len(batch)} tree tokens, "
          f"{int(batch.decision.sum())} decision tokens; model {args.layers} layers, {cfg.model.dtype}; "
          f"torch threads {torch.get_num_threads()}; token_budget {cfg.algorithm.token_budget}", flush=True)
    table = candidates(cfg)
    backwards = backward_counter(trainer.policy)
    rows = []
    for name in args.candidates.split(","):
        if name not in table:
            raise SystemExit(f"unknown candidate {name!r}: have {', '.join(table)}")
        rows += compare(trainer, batch, backwards, name, *table[name], repeats=args.repeats)
    summary(rows)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
