"""OfficeQA (databricks/officeqa): grounded questions over U.S. Treasury Bulletins, as harnessrl tasks.

The published data (Hugging Face dataset `databricks/officeqa`, gated; the code repository on
GitHub holds `reward.py`), downloaded as it is:

    ROOT/
      officeqa_pro.csv    uid, question, answer, source_docs, source_files, difficulty (133 rows)
      officeqa_full.csv   the same columns (246 rows); older releases: officeqa.csv without
                          source_files (the bulletin names are then read from the source_docs URLs)
      treasury_bulletins_parsed/transformed/treasury_bulletin_YYYY_MM.txt   the parsed corpus

    huggingface-cli download databricks/officeqa --repo-type dataset --local-dir ROOT \\
        --include officeqa_pro.csv officeqa_full.csv 'treasury_bulletins_parsed/transformed/*.txt'

One task per question. Its workspace holds the bulletins the question names (`docs="oracle"`,
under `docs/`) or nothing (`docs="none"`, the closed-book setting). The agent answers in
`answer.txt` or in its final message (inside <FINAL_ANSWER> tags, as OfficeQA's prompt asks). The
verifier is `officeqa_score.py` (OfficeQA's scoring rules, stricter where the answer is hostile)
with the ground truth in its own files only: the agent never sees it. The reference solution
writes the ground truth to answer.txt, so `harnessrl tasks validate` checks both directions.

`python -m harnessrl.tasks.officeqa ROOT OUT [--subset pro|full] [--docs oracle|none]` writes
the tasks as native task directories that `--tasks OUT` loads.
"""

from __future__ import annotations

import csv
import io
import json
import re
import shlex
from pathlib import Path
from typing import Literal

from harnessrl.tasks.files import TaskDataReader, TaskLimits
from harnessrl.tasks.model import Task, TaskError, Verifier

SUBSETS = {"pro": "officeqa_pro.csv", "full": "officeqa_full.csv"}
LEGACY_CSV = "officeqa.csv"  # the first release (GitHub): no source_files column
CORPUS = "treasury_bulletins_parsed/transformed"
SCORER = "officeqa_score.py"
COLUMNS = ("uid", "question", "answer")
DOWNLOAD = ("huggingface-cli download databricks/officeqa --repo-type dataset --local-dir ROOT --include "
            "officeqa_pro.csv officeqa_full.csv 'treasury_bulletins_parsed/transformed/*.txt' (a gated dataset: "
            "request access on Hugging Face and set HF_TOKEN first)")
MONTHS = {m: i for i, m in enumerate(("january", "february", "march", "april", "may", "june", "july", "august",
                                      "september", "october", "november", "december"), start=1)}
_FILE_NAME = re.compile(r"treasury_bulletin_(\d{4})_(\d{2})")
_URL = re.compile(r"treasury-bulletin-\d+/([a-z]+)-(\d{4})-\d+")
Docs = Literal["oracle", "none"]

PROMPT = """{question}

{where}Give one final answer: write it alone to answer.txt in your working directory, or end your \
reply with <FINAL_ANSWER>your answer</FINAL_ANSWER>."""
WHERE_ORACLE = ("The U.S. Treasury Bulletin issues you need are in docs/ of your working directory "
                "(parsed text: {names}).\n\n")


def csv_path(root: Path, subset: str) -> Path:
    """The question file of `subset` in a downloaded OfficeQA directory (the legacy officeqa.csv
    when only that is there); TaskError with the download command when there is none."""
    if subset not in SUBSETS:
        raise TaskError(f"OfficeQA subset must be one of {', '.join(SUBSETS)}, got {subset!r}")
    for name in (SUBSETS[subset], LEGACY_CSV):
        if (root / name).is_file():
            return root / name
    raise TaskError(f"{root}: no {SUBSETS[subset]} (nor {LEGACY_CSV}); download the data with: {DOWNLOAD}")


def source_files(row: dict[str, str]) -> list[str]:
    """The bulletins (`treasury_bulletin_YYYY_MM`) a question names: from source_files, else from
    the FRASER URLs of source_docs (`.../treasury-bulletin-407/january-1941-6529?page=15`)."""
    names = [f"treasury_bulletin_{y}_{m}" for y, m in _FILE_NAME.findall(row.get("source_files") or "")]
    if not names:
        urls = (row.get("source_docs") or "").lower()
        names = [f"treasury_bulletin_{y}_{MONTHS[m]:02d}" for m, y in _URL.findall(urls) if m in MONTHS]
    return list(dict.fromkeys(names))


def read_rows(path: Path, limits: TaskLimits | None = None) -> list[dict[str, str]]:
    """The rows of an OfficeQA CSV; TaskError names a missing column or a row without a uid."""
    with TaskDataReader(path.parent, limits) as reader:
        text = reader.read_text(path.name)
    rows = list(csv.DictReader(io.StringIO(text)))
    missing = [c for c in COLUMNS if rows and c not in rows[0]]
    if not rows or missing:
        raise TaskError(f"{path}: not an OfficeQA question file (missing columns {missing or list(COLUMNS)}; "
                        f"expected uid, question, answer, source_docs, source_files, difficulty)")
    for i, row in enumerate(rows, start=2):
        if not all((row.get(c) or "").strip() for c in COLUMNS):
            raise TaskError(f"{path}: line {i}: uid, question and answer must all be non-empty")
    return rows


def load_officeqa(root: str | Path, subset: str = "pro", docs: Docs = "oracle", tolerance: float = 0.0,
                  corpus: str | Path | None = None, limits: TaskLimits | None = None) -> list[Task]:
    """OfficeQA questions of a downloaded directory as tasks (see the module docstring).
    `tolerance`: the relative error an answer may have (0.0 = OfficeQA's default, exact);
    `corpus`: where the parsed bulletins are (default ROOT/treasury_bulletins_parsed/transformed)."""
    root = Path(root)
    if docs not in ("oracle", "none"):
        raise TaskError(f"OfficeQA docs must be 'oracle' or 'none', got {docs!r}")
    if not 0.0 <= tolerance <= 1.0:
        raise TaskError(f"OfficeQA tolerance must be in [0, 1], got {tolerance}")
    path = csv_path(root, subset)
    corpus_dir = Path(corpus) if corpus is not None else root / CORPUS
    scorer = (Path(__file__).with_name(SCORER)).read_bytes()
    tasks = [_task(row, path, docs, tolerance, corpus_dir, scorer, limits) for row in read_rows(path, limits)]
    ids = [t.id for t in tasks]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise TaskError(f"{path}: duplicate uids {dupes}")
    return tasks


def _task(row: dict[str, str], path: Path, docs: Docs, tolerance: float, corpus: Path, scorer: bytes,
          limits: TaskLimits | None) -> Task:
    uid, answer = row["uid"].strip(), row["answer"].strip()
    names = source_files(row)
    files: dict[str, bytes] = {}
    if docs == "oracle":
        if not names:
            raise TaskError(f"{path}: question {uid} names no bulletin (source_files or source_docs)")
        if not corpus.is_dir():
            raise TaskError(f"{corpus}: the parsed corpus is not there; download it with: {DOWNLOAD}")
        with TaskDataReader(corpus, limits) as reader:
            for name in names:
                if not reader.exists(f"{name}.txt"):
                    raise TaskError(f"{corpus / (name + '.txt')}: missing (question {uid}); download the corpus "
                                    f"with: {DOWNLOAD}")
                files[f"docs/{name}.txt"] = reader.read_file(f"{name}.txt")
    where = WHERE_ORACLE.format(names=", ".join(f"{n}.txt" for n in names)) if docs == "oracle" else ""
    difficulty = (row.get("difficulty") or "").strip().lower() or "unrated"
    expected = json.dumps({"uid": uid, "answer": answer, "tolerance": tolerance}).encode()
    return Task(
        id=f"officeqa-{uid}",
        instruction=PROMPT.format(question=row["question"].strip(), where=where),
        files=files,
        verifier=Verifier(kind="checks", command=f"python3 -I .verifier/{SCORER}",
                          files={SCORER: scorer, "expected.json": expected}, timeout_s=60.0),
        category=f"officeqa_{difficulty}",
        split="test",
        family="officeqa",
        pass_threshold=1.0,
        reference_solution=(f"printf '%s\\n' {shlex.quote(answer)} > answer.txt",),
        metadata={"benchmark": "officeqa", "uid": uid, "difficulty": difficulty, "source_files": names,
                  "docs": docs, "source_docs": (row.get("source_docs") or "").split()},
        source=str(path),
    )


def export_officeqa(root: str | Path, out: str | Path, subset: str = "pro", docs: Docs = "oracle",
                    tolerance: float = 0.0, limit: int | None = None) -> list[Path]:
    """Write OfficeQA's tasks as native task directories `out/<task id>/` (TaskError before
    writing anything when `out` already holds one of them)."""
    from harnessrl.tasks.native import write_native

    tasks = load_officeqa(root, subset, docs, tolerance)[:limit]
    out = Path(out)
    taken = [t.id for t in tasks if (out / t.id).exists()]
    if taken:
        raise TaskError(f"{out}: task directories already exist ({', '.join(taken[:5])}); export into a new directory")
    return [write_native(t, out / t.id) for t in tasks]


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m harnessrl.tasks.officeqa",
                                description="Write OfficeQA questions as harnessrl task directories.")
    p.add_argument("root", help="the downloaded databricks/officeqa dataset directory")
    p.add_argument("out", help="where to write one task directory per question")
    p.add_argument("--subset", choices=sorted(SUBSETS), default="pro")
    p.add_argument("--docs", choices=("oracle", "none"), default="oracle")
    p.add_argument("--tolerance", type=float, default=0.0, help="relative error allowed (0 = exact)")
    p.add_argument("--limit", type=int, default=None, help="at most this many questions")
    args = p.parse_args(argv)
    try:
        written = export_officeqa(args.root, args.out, args.subset, args.docs, args.tolerance, args.limit)
    except TaskError as e:
        print(f"error: {e}")
        return 2
    print(f"wrote {len(written)} OfficeQA task directories to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
