"""What a run's read-then-act rollouts did, before and after training: the action each held-out
task wanted (its reference's last command: rm, cp or echo), the pass rate, how many read the note
first (and the pass rate of those that did and of those that did not), and which command the
rollout ended on. A fall in `lookup:*` pass@1 shows here as a shift of actions (e.g. every task
answered with `echo`), a rise as the wanted action taking over.

    .venv/bin/python benchmarks/lookup_actions.py RUN_DIR [RUN_DIR ...] [--split train]

Reads the run's store (the calls' sampled ids, decoded with the default model's tokenizer); prints
one markdown table; nothing is written.
"""

from __future__ import annotations

import argparse
import collections
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from harnessrl.engine import resolve_model  # noqa: E402
from harnessrl.store.run_store import RunStore  # noqa: E402
from harnessrl.tasks import load_tasks  # noqa: E402

BASH = re.compile(r"```bash\n(.*?)\n```", re.S)
SETS = ("train", "test", "style", "long", "reworded")


def verb(command: str | None) -> str:
    return command.split()[0].rstrip(":") if command and command.split() else "-"


def commands(store: RunStore, rollout_id: str, decode) -> list[str]:
    calls = sorted(store.list_calls([rollout_id]), key=lambda c: c.seq)
    found = [BASH.search(decode(c.sampled_ids)) for c in calls]
    return [m.group(1).strip() for m in found if m]


def run_rows(run_dir: Path, split: str, decode) -> dict[tuple[str, str], collections.Counter]:
    """{(phase, wanted action): counts of n, passed, read first, and 'did <verb>'}."""
    tasks = {t.id: t for s in SETS for t in load_tasks(f"builtin:lookup:{s}")}
    rows: dict[tuple[str, str], collections.Counter] = collections.defaultdict(collections.Counter)
    with RunStore(run_dir) as store:
        rollouts = [r for r in store.list_rollouts() if r.task_id in tasks
                    and ((r.split == "train") == (split == "train"))]
        if not rollouts:
            return rows
        last = max(r.step for r in rollouts)
        for r in rollouts:
            if split != "train" and r.step not in (0, last):
                continue
            task = tasks[r.task_id]
            cmds = commands(store, r.rollout_id, decode)
            phase = "train" if split == "train" else "before" if r.step == 0 else "after"
            row = rows[(phase, verb(task.reference_solution[-1]))]
            row["n"] += 1
            row["passed"] += bool(r.reward)
            read = bool(cmds) and cmds[0].startswith("cat")
            row["read first"] += read
            row["passed, read first" if read else "passed, not read first"] += bool(r.reward)
            row[f"did {verb(cmds[-1]) if cmds else '-'}"] += 1
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dirs", nargs="+", type=Path)
    ap.add_argument("--split", default="eval", choices=("eval", "train"),
                    help="eval: the held-out lookup sets before and after; train: the training rollouts")
    args = ap.parse_args()
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(resolve_model(None))
    verbs = ("rm", "cp", "echo", "cat", "-")
    print("| run | phase | wanted | rollouts | passed | read the note first | passed if read first | passed if not | "
          + " | ".join(f"ended on {v}" for v in verbs) + " |")
    print("|---|---|---|---:|---:|---:|---:|---:|" + "---:|" * len(verbs))
    for run_dir in args.run_dirs:
        rows = run_rows(run_dir, args.split, tok.decode)
        for (phase, want), c in sorted(rows.items(), key=lambda kv: (kv[0][0] != "before", kv[0])):
            n, read = c["n"], c["read first"]
            when_read = f"{c['passed, read first'] / read:.0%}" if read else "-"
            when_not = f"{c['passed, not read first'] / (n - read):.0%}" if n > read else "-"
            print(f"| {run_dir.name} | {phase} | {want} | {n} | {c['passed'] / n:.0%} | {read / n:.0%} | {when_read} | "
                  f"{when_not} | "
                  + " | ".join(f"{c[f'did {v}'] / n:.0%}" for v in verbs) + " |")


if __name__ == "__main__":
    main()
