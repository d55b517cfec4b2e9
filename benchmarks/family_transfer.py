"""Does training one task family move another? A first-order probe on a finished run.

From the run's starting policy (its cold start, or --model), take a few optimizer steps on the
passing training rollouts of one family (cross-entropy on their sampled tokens: what a GRPO step
does to a passing rollout's tokens, with advantage 1) and measure how the log-probability of the
held-out read-then-act rollouts' *first* call moves:

- "read the note first": baseline-eval rollouts of `lookup:*` whose first command was `cat <note>`
  (the right start);
- "act at once": those whose first command acted on the named file (the file-job habit).

A family that raises "act at once" and lowers "read first" on held-out read-then-act prompts is
negative transfer onto it. Each family gets the same number of rollouts (the smaller family's
count), from the same starting weights.

    .venv/bin/python benchmarks/family_transfer.py RUN_DIR [--steps 3 --lr 3e-5 --train-steps 1,2]

Prints a markdown table (change of the mean log-probability per token, in nats); nothing is written.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from harnessrl.sft.data import SFTGroup, harness_trees  # noqa: E402
from harnessrl.store.run_store import RunStore  # noqa: E402


def is_lookup(task_id: str) -> bool:
    return task_id.startswith("lookup-")


def passing_groups(store: RunStore, steps: set[int], lookup: bool) -> list[SFTGroup]:
    """One SFTGroup per passing training rollout of the chosen family at the given steps."""
    rollouts = [r for r in store.list_rollouts() if r.split == "train" and r.step in steps and r.reward
                and r.lineage is None and is_lookup(r.task_id) == lookup]
    return [SFTGroup(r.harness, [r], store.list_calls([r.rollout_id], as_arrays=True)) for r in rollouts]


def first_call_probes(store: RunStore, decode) -> dict[str, list[SFTGroup]]:
    """The first calls of the baseline eval's read-then-act rollouts, split by what they did."""
    out: dict[str, list[SFTGroup]] = defaultdict(list)
    for r in store.list_rollouts():
        if r.step != 0 or r.split == "train" or not is_lookup(r.task_id):
            continue
        calls = sorted(store.list_calls([r.rollout_id], as_arrays=True), key=lambda c: c.seq)
        if not calls:
            continue
        text = decode(calls[0].sampled_ids)
        kind = "read the note first" if "```bash\ncat " in text else "act at once"
        out[kind].append(SFTGroup(r.harness, [r], calls[:1]))
    return out


def main() -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from harnessrl.train.losses import PPOSettings
    from harnessrl.train.packing import default_backend
    from harnessrl.train.sft import sft_batch, sft_nll, sft_update
    from harnessrl.train.trainer import Trainer

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--model", default=None, help="starting policy (default: RUN_DIR/cold_start/sft/policy)")
    ap.add_argument("--steps", type=int, default=3, help="optimizer steps on each family's rollouts")
    ap.add_argument("--lr", type=float, default=3e-5)
    ap.add_argument("--train-steps", default="1,2", help="the run's steps whose training rollouts are used")
    args = ap.parse_args()
    model_dir = args.model or str(args.run_dir / "cold_start" / "sft" / "policy")
    tok = AutoTokenizer.from_pretrained(model_dir)
    steps = {int(s) for s in args.train_steps.split(",")}
    with RunStore(args.run_dir) as store:
        families = {"file jobs": passing_groups(store, steps, lookup=False),
                    "read-then-act": passing_groups(store, steps, lookup=True)}
        probes = first_call_probes(store, tok.decode)
    n = min(len(g) for g in families.values())
    rng = random.Random(0)
    families = {k: rng.sample(v, n) for k, v in families.items()}
    probe_batches = {k: sft_batch(harness_trees(v)) for k, v in probes.items() if v}
    torch.manual_seed(0)
    torch.set_num_threads(1)
    rows = []
    for family, groups in families.items():
        policy = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="sdpa")
        trainer = Trainer(policy, torch.optim.AdamW(policy.parameters(), lr=args.lr), PPOSettings(is_mode="none"),
                          2048, default_backend(torch.device("cpu")))
        before = {k: sft_nll(trainer, b) for k, b in probe_batches.items()}
        batch = sft_batch(harness_trees(groups))
        for _ in range(args.steps):
            sft_update(trainer, batch)
        after = {k: sft_nll(trainer, b) for k, b in probe_batches.items()}
        rows.append((family, {k: before[k] - after[k] for k in before}))  # NLL down = log p up
    kinds = list(probe_batches)
    print(f"{n} passing training rollouts per family (steps {sorted(steps)}), {args.steps} AdamW steps at lr "
          f"{args.lr:g}, from {model_dir}; probes: " + ", ".join(f"{k} {len(probes[k])}" for k in kinds))
    print("\n| trained on | " + " | ".join(f"held-out read-then-act, {k}: change of log p per token" for k in kinds)
          + " |\n|---|" + "---:|" * len(kinds))
    for family, delta in rows:
        print(f"| {family} | " + " | ".join(f"{delta[k]:+.4f}" for k in kinds) + " |")


if __name__ == "__main__":
    main()
