"""Prefix-tree benchmark: token sharing on Claude-Code-shaped groups and tree build time.

    .venv/bin/python benchmarks/tree_sharing.py [--rollouts 8] [--prefix 10000] [--turns 10]
                                                [--build-calls 1000] [--call-tokens 20000] [--repeats 3]

1. Sharing: a GRPO group of --rollouts rollouts with a --prefix-token shared prefix (system prompt +
   tools + task) and --turns calls each (each call resends the whole history). Prints
   per_call_tokens / unique_tokens (tree vs one row per call) and per_rollout_tokens /
   unique_tokens (tree vs one row per rollout path).
2. Build time: --build-calls calls of about --call-tokens tokens (groups of 8 rollouts x 10 turns
   over a long shared prefix), records already in memory as the store returns them (Python lists),
   time of build_tree summed over the groups, median of --repeats; plus the time of the flat
   packing arrays and of grpo advantages. A naive per-token dict trie on a slice gives the
   baseline; the same build from int32 arrays shows what the list -> array conversion costs.
3. The same sharing figures on the captured real-harness groups in tests/fixtures/harness_calls.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from harnessrl.algo import grpo
from harnessrl.store.records import CallRecord
from harnessrl.tree import build_tree, sum_stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/support: shared scaffolding
from tests.support.synthetic import claude_code_group, make_rollout  # noqa: E402

CALL_FIELDS = {f.name for f in dataclasses.fields(CallRecord)}
FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "harness_calls"


def sharing(rollouts: int, prefix: int, turns: int, seeds: int) -> dict:
    stats = sum_stats(build_tree(*claude_code_group(rollouts, prefix, turns, seed=s, group_id=f"g{s}")).stats
                      for s in range(seeds))
    return {"unique": stats.unique_tokens, "per_call": stats.per_call_tokens,
            "per_rollout": stats.per_rollout_tokens, "decision": stats.decision_tokens,
            "call_ratio": stats.call_sharing, "rollout_ratio": stats.rollout_sharing}


def build_groups(n_calls: int, call_tokens: int) -> list[tuple[list, list]]:
    """Groups of 8 rollouts x 10 turns whose calls grow to about call_tokens tokens."""
    per_group = 8 * 10
    prefix = int(call_tokens * 0.8)
    groups = []
    for g in range((n_calls + per_group - 1) // per_group):
        groups.append(claude_code_group(8, prefix, 10, completion_tokens=(100, 300),
                                        observation_tokens=(100, 700), seed=100 + g, group_id=f"b{g}"))
    return groups


def fixture_sharing(directory: Path) -> None:
    """Sharing on the captured real-harness groups (tests/fixtures/harness_calls/*.jsonl)."""
    for path in sorted(directory.glob("*.jsonl")):
        calls, rollout_ids = [], {}
        for line in path.read_text(encoding="utf-8").splitlines():
            obj = json.loads(line)
            if "prompt_ids" in obj:
                calls.append(CallRecord(**{k: v for k, v in obj.items() if k in CALL_FIELDS}))
                rollout_ids.setdefault(obj["rollout_id"], None)
        rollouts = [make_rollout(r, 1.0, group_id=path.stem) for r in rollout_ids]
        tree = build_tree(calls, rollouts)
        s = tree.stats
        first_branch = min((n.start_pos for n in tree.nodes if n.branch_reason), default=None)
        print(f"  {path.stem}: {len(rollouts)} rollouts, {s.calls} calls, unique={s.unique_tokens} "
              f"per_call/unique={s.call_sharing:.2f} per_rollout/unique={s.rollout_sharing:.2f} "
              f"first branch at token {first_branch} of {max(p.n_tokens for p in tree.paths)} "
              f"branches={s.branch_reasons}")


def naive_build(calls) -> int:
    """Baseline: a per-token dict trie over Python lists (what the numpy trie replaces)."""
    root: dict = {}
    for c in calls:
        node = root
        for t in list(c.prompt_ids) + list(c.sampled_ids):
            node = node.setdefault(t, {})
    return len(root)


def timed(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rollouts", type=int, default=8)
    ap.add_argument("--prefix", type=int, default=10_000)
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--build-calls", type=int, default=1000)
    ap.add_argument("--call-tokens", type=int, default=20_000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    s = sharing(args.rollouts, args.prefix, args.turns, args.seeds)
    print(f"sharing ({args.seeds} groups x {args.rollouts} rollouts, {args.prefix}-token prefix, "
          f"{args.turns} turns): unique={s['unique']} decision={s['decision']} per_call={s['per_call']} "
          f"per_rollout={s['per_rollout']}")
    print(f"  per_call_tokens / unique_tokens    = {s['call_ratio']:.2f}")
    print(f"  per_rollout_tokens / unique_tokens = {s['rollout_ratio']:.2f}")

    if FIXTURES.is_dir():
        print("captured real-harness groups:")
        fixture_sharing(FIXTURES)

    groups = build_groups(args.build_calls, args.call_tokens)
    calls = [c for g, _ in groups for c in g][: args.build_calls]
    n_calls = len(calls)
    total_tokens = sum(len(c.prompt_ids) + len(c.sampled_ids) for c in calls)
    mean_len = total_tokens / n_calls
    build = timed(lambda: [build_tree(c, r) for c, r in groups], args.repeats)
    trees = [build_tree(c, r) for c, r in groups]
    flat = timed(lambda: [t.__dict__.pop("_flat", None) or t.flat() for t in trees], args.repeats)
    adv = timed(lambda: [grpo(t) for t in trees], args.repeats)
    as_arrays = [([replace(c, prompt_ids=np.asarray(c.prompt_ids, np.int32),
                           sampled_ids=np.asarray(c.sampled_ids, np.int32)) for c in cs], r) for cs, r in groups]
    build_np = timed(lambda: [build_tree(c, r) for c, r in as_arrays], args.repeats)
    slice_calls = calls[: max(1, n_calls // 20)]
    naive = timed(lambda: naive_build(slice_calls), 1) * n_calls / len(slice_calls)
    per_1000 = build * 1000 / n_calls
    print(f"build: {n_calls} calls, mean {mean_len:.0f} tokens/call ({total_tokens / 1e6:.1f} M tokens), "
          f"{len(groups)} groups")
    print(f"  build_tree: {build:.3f} s total = {per_1000:.3f} s per 1000 calls "
          f"({per_1000 * args.call_tokens / mean_len:.3f} s per 1000 calls of {args.call_tokens} tokens)")
    print(f"  with int32-array ids (RunStore.list_calls(as_arrays=True)): {build_np * 1000 / n_calls:.3f} s "
          "per 1000 calls")
    print(f"  flat packing arrays: {flat:.3f} s; grpo advantages: {adv:.3f} s")
    print(f"  naive per-token dict trie (extrapolated from {len(slice_calls)} calls): {naive:.1f} s "
          f"({naive / build:.0f}x slower)")


if __name__ == "__main__":
    main()
