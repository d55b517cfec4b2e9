"""Do held-out file jobs treat the file they name as a note? Per run, before and after training:
how many held-out file-job rollouts (`builtin:test`) begin with `cat`, how many of those fail, and
how many of the failures then act with the words the read file holds (`Erase the file ledger.txt.`
-> `cat ledger.txt`, `echo yak > ledger.txt`): the read-then-act habit carried over to a request
that needs no note.

    .venv/bin/python benchmarks/file_job_reads.py RUN_DIR [RUN_DIR ...]

Reads the run's store (the calls' sampled ids, decoded with the default model's tokenizer); prints
one markdown table; nothing is written.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from lookup_actions import commands  # noqa: E402

from harnessrl.engine import resolve_model  # noqa: E402
from harnessrl.store.records import rollout_passed  # noqa: E402
from harnessrl.store.run_store import RunStore  # noqa: E402
from harnessrl.tasks import load_tasks  # noqa: E402

WORD = re.compile(r"[A-Za-z0-9_]+")


def acts_on_content(cmds: list[str], body: str) -> bool:
    """Whether a command after the first uses a word of the read file's text."""
    words = set(WORD.findall(body))
    later = set(WORD.findall(" ".join(cmds[1:])))
    return bool(words & later)


def run_rows(run_dir: Path, decode) -> list[tuple[str, int, int, int, int]]:
    """(phase, rollouts, begin with cat, of those failed, of those acted with the file's words)."""
    tasks = {t.id: t for t in load_tasks("builtin:test")}
    out = []
    with RunStore(run_dir) as store:
        rollouts = [r for r in store.list_rollouts() if r.split == "test" and r.task_id in tasks]
        if not rollouts:
            return out
        last = max(r.step for r in rollouts)
        for phase, step in (("before", 0), ("after", last)):
            n = read = failed = on_content = 0
            for r in (r for r in rollouts if r.step == step):
                n += 1
                cmds = commands(store, r.rollout_id, decode)
                if not cmds or not cmds[0].startswith("cat"):
                    continue
                read += 1
                if rollout_passed(r, tasks[r.task_id]):
                    continue
                failed += 1
                name = cmds[0].split()[1] if len(cmds[0].split()) > 1 else ""
                body = tasks[r.task_id].files.get(name, b"").decode(errors="replace")
                on_content += acts_on_content(cmds, body)
            out.append((phase, n, read, failed, on_content))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dirs", nargs="+", type=Path)
    args = ap.parse_args()
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(resolve_model(None))
    print("| run | phase | file-job rollouts | begin with cat | of those failed | failed acting with the file's words |")
    print("|---|---|---:|---:|---:|---:|")
    for run_dir in args.run_dirs:
        for phase, n, read, failed, on_content in run_rows(run_dir, tok.decode):
            print(f"| {run_dir.name} | {phase} | {n} | {read} ({read / n:.0%}) | {failed} | {on_content} |")


if __name__ == "__main__":
    main()
