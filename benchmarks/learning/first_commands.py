"""What a run's policy does first: per eval set / train split, step and harness, the most common
command in the first model reply of each rollout (the first word of its first ```bash block, or
"(no command)"), read from the stored sampled ids. A reward that can be farmed shows up here as
one command taking over every job (learning run 3: `touch`, docs/history/benchmarks-2026-12.md,
"Learning through real harnesses").

    .venv/bin/python benchmarks/learning/first_commands.py RUN_DIR [--top 3]
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from harnessrl.store import RunStore  # noqa: E402

FENCE = re.compile(r"```(?:bash|sh)?\s*\n\s*([^\s`]+)")


def first_command(text: str) -> str:
    m = FENCE.search(text)
    return m.group(1) if m else "(no command)"


def table(run_dir: Path, decode, top: int = 3) -> list[str]:
    with RunStore(run_dir) as store:
        rollouts = store.list_rollouts()
        calls = store.list_calls([r.rollout_id for r in rollouts], as_arrays=True)
    first = {}
    for c in calls:
        if c.rollout_id not in first or c.seq < first[c.rollout_id].seq:
            first[c.rollout_id] = c
    counts: dict[tuple[str, int, str], Counter] = defaultdict(Counter)
    for r in rollouts:
        if r.rollout_id in first:
            counts[(r.split, r.step, r.harness)][first_command(decode(first[r.rollout_id].sampled_ids))] += 1
    lines = ["| split | step | harness | rollouts | most common first commands |", "|---|---:|---|---:|---|"]
    for (split, step, harness), cnt in sorted(counts.items()):
        n = sum(cnt.values())
        common = ", ".join(f"`{cmd}` {k}/{n}" for cmd, k in cnt.most_common(top))
        lines.append(f"| {split} | {step} | {harness} | {n} | {common} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--top", type=int, default=3)
    args = ap.parse_args()
    from transformers import AutoTokenizer

    from harnessrl.engine.model import smollm2_tokenizer_dir
    from harnessrl.config import RunConfig

    with RunStore(args.run_dir) as store:
        cfg = RunConfig.model_validate(store.get_meta("config") or {})
    tok = AutoTokenizer.from_pretrained(cfg.model.path or smollm2_tokenizer_dir())
    print("\n".join(table(args.run_dir, lambda ids: tok.decode(list(ids)), args.top)))


if __name__ == "__main__":
    main()
