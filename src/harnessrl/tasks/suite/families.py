"""The jobs of the built-in suite: what each family's task asks, its starting files, named checks
and reference solution. The WORDING lives elsewhere: training templates in `templates.py`,
paraphrases in `paraphrase.py`; a job only fills named slots (`{name}`, `{word}`, ...) that every
template of the family uses.

Each generator takes (rng, pools) and returns a Job; every value (words, file names, numbers,
row counts) comes from the seeded rng and the split's pools. `TRAINED` families have train, test
and paraphrase splits; the others are never trained on and only appear in the `unseen` split.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any, Callable

from harnessrl.tasks.suite.pools import Pools


@dataclass(frozen=True)
class Job:
    """One task's content, before wording: slots for the template, files, checks, solution."""

    slots: dict[str, str]
    files: dict[str, str]
    checks: list[dict[str, Any]]  # {"name", "kind", ...} as read by checker.py
    solution: tuple[str, ...]
    meta: dict[str, Any]


@dataclass(frozen=True)
class Family:
    name: str
    category: str
    make: Callable[[random.Random, Pools], Job]
    trained: bool  # False: held out from training entirely (only in the `unseen` split)


def _exists(path: str) -> dict:
    return {"name": f"{path} exists", "kind": "file_exists", "path": path}


def _equals(path: str, value: str, name: str = "") -> dict:
    return {"name": name or f"{path} holds {value!r}", "kind": "text_equals", "path": path, "value": value}


def _absent(path: str) -> dict:
    return {"name": f"{path} is gone", "kind": "file_absent", "path": path}


def _number(path: str, value: int, name: str) -> dict:
    return {"name": name, "kind": "number_equals", "path": path, "value": value}


# -- trained families (one-command file jobs the small model sometimes gets right) -------------

def write_word(rng: random.Random, p: Pools) -> Job:
    word, name = p.word(rng), p.file(rng)
    return Job({"name": name, "word": word}, {}, [_exists(name), _equals(name, word)],
               (f"echo {word} > {name}",), {"answer": word, "file": name})


def touch_file(rng: random.Random, p: Pools) -> Job:
    name, other = p.files(rng, 2)
    files = {other: f"{p.word(rng)}\n"} if rng.random() < 0.5 else {}  # sometimes not an empty workspace
    return Job({"name": name}, files, [_exists(name)], (f"touch {name}",), {"answer": name})


def delete_file(rng: random.Random, p: Pools) -> Job:
    names = p.files(rng, rng.randint(2, 4))
    name, keep = names[0], names[1:]
    files = {n: f"{p.word(rng)}\n" for n in names}
    checks = [_absent(name)] + [_equals(k, files[k].strip(), f"{k} kept") for k in keep]
    return Job({"name": name}, files, checks, (f"rm {name}",), {"answer": name})


def rename_file(rng: random.Random, p: Pools) -> Job:
    src, dst = p.files(rng, 2)
    body = " ".join(p.sample(rng, 2))
    checks = [_equals(dst, body, "renamed file has the text"), _absent(src)]
    return Job({"src": src, "dst": dst}, {src: body + "\n"}, checks, (f"mv {src} {dst}",), {"answer": dst})


def copy_file(rng: random.Random, p: Pools) -> Job:
    src, dst = p.files(rng, 2)
    body = " ".join(p.sample(rng, rng.randint(1, 3)))
    checks = [_exists(dst), _equals(dst, body, "copy has the same text"), _equals(src, body, "original kept")]
    return Job({"src": src, "dst": dst}, {src: body + "\n"}, checks, (f"cp {src} {dst}",), {"answer": dst})


def overwrite(rng: random.Random, p: Pools) -> Job:
    name, (word, old) = p.file(rng), p.sample(rng, 2)
    checks = [_equals(name, word), {"name": "old text removed", "kind": "text_lacks", "path": name, "value": old}]
    return Job({"name": name, "word": word}, {name: f"{old} {old}\n"}, checks, (f"echo {word} > {name}",),
               {"answer": word})


def csv_count_rows(rng: random.Random, p: Pools) -> Job:
    src, out = p.files(rng, 2, ("csv", "txt"))
    cols = rng.choice([("name", "size"), ("item", "qty"), ("label", "count"), ("key", "value")])
    rows = [",".join(cols)] + [f"{w},{rng.randint(1, 99)}" for w in p.sample(rng, rng.randint(2, 9))]
    checks = [_exists(out), _number(out, len(rows), "row count")]
    return Job({"src": src, "out": out}, {src: "\n".join(rows) + "\n"}, checks, (f"wc -l < {src} > {out}",),
               {"answer": len(rows)})


# -- families never trained on (the `unseen` split) -------------------------------------------

def make_dir(rng: random.Random, p: Pools) -> Job:
    d = p.dir(rng)
    return Job({"d": d}, {}, [{"name": f"{d}/ exists", "kind": "dir_exists", "path": d}], (f"mkdir {d}",),
               {"answer": d})


def empty_file(rng: random.Random, p: Pools) -> Job:
    name = p.file(rng)
    return Job({"name": name}, {name: " ".join(p.sample(rng, 3)) + "\n"}, [_exists(name), _equals(name, "", "file is empty")],
               (f"truncate -s 0 {name}",), {})


def append_line(rng: random.Random, p: Pools) -> Job:
    name, words = p.file(rng), p.sample(rng, 3)
    checks: list[dict[str, Any]] = [{"name": "new last line", "kind": "last_line", "path": name, "value": words[2]},
              {"name": "old lines kept", "kind": "lines_equal", "path": name, "lines": words}]
    return Job({"name": name, "word": words[2]}, {name: f"{words[0]}\n{words[1]}\n"}, checks,
               (f"echo {words[2]} >> {name}",), {"answer": words[2]})


def replace_word(rng: random.Random, p: Pools) -> Job:
    name, (old, new, other) = p.file(rng), p.sample(rng, 3)
    body = f"the {old} is next to the {other}"
    checks = [{"name": f"{old} removed", "kind": "text_lacks", "path": name, "value": old},
              {"name": f"{new} present", "kind": "text_contains", "path": name, "value": new},
              _equals(name, body.replace(old, new), "rest unchanged")]
    return Job({"name": name, "old": old, "new": new}, {name: body + "\n"}, checks,
               (f"sed -i 's/{old}/{new}/g' {name}",), {"answer": new})


def csv_header(rng: random.Random, p: Pools) -> Job:
    src, out = p.files(rng, 2, ("csv", "txt"))
    cols = p.sample(rng, 3)
    rows = [",".join(cols)] + [",".join(str(rng.randint(1, 99)) for _ in cols) for _ in range(rng.randint(2, 5))]
    return Job({"src": src, "out": out}, {src: "\n".join(rows) + "\n"},
               [_exists(out), _equals(out, rows[0], "header written")], (f"head -n 1 {src} > {out}",), {})


def csv_grep(rng: random.Random, p: Pools) -> Job:
    src, out = p.files(rng, 2, ("csv", "txt"))
    names = p.sample(rng, 4)
    rows = ["name,color"] + [f"{n},{rng.choice(['red', 'blue', 'green'])}" for n in names]
    word = rng.choice(names)
    checks = [_exists(out), {"name": "matching rows", "kind": "lines_equal", "path": out,
                             "lines": [r for r in rows if word in r]}]
    return Job({"src": src, "word": word, "out": out}, {src: "\n".join(rows) + "\n"}, checks,
               (f"grep {word} {src} > {out}",), {})


def json_field(rng: random.Random, p: Pools) -> Job:
    src, out = p.files(rng, 2, ("json", "txt"))
    data = {"name": p.word(rng), "color": rng.choice(["red", "blue", "green", "gold"]), "size": rng.randint(2, 90)}
    key = rng.choice(sorted(data))
    solution = (f"python3 -c \"import json; print(json.load(open('{src}'))['{key}'])\" > {out}",)
    return Job({"src": src, "key": key, "out": out}, {src: json.dumps(data, indent=2) + "\n"},
               [_exists(out), _equals(out, str(data[key]), "value written")], solution, {"key": key})


def csv_sum(rng: random.Random, p: Pools) -> Job:
    src, out = p.files(rng, 2, ("csv", "txt"))
    qty = [rng.randint(1, 20) for _ in range(rng.randint(3, 5))]
    rows = ["item,qty"] + [f"{i},{q}" for i, q in zip(p.sample(rng, len(qty)), qty)]
    solution = (f"awk -F, 'NR>1 {{s+=$2}} END {{print s}}' {src} > {out}",)
    return Job({"src": src, "out": out}, {src: "\n".join(rows) + "\n"},
               [_exists(out), _number(out, sum(qty), "total correct")], solution, {})


def mkdir_write(rng: random.Random, p: Pools) -> Job:
    d, name, word = p.dir(rng), p.file(rng), p.word(rng)
    checks = [{"name": f"{d}/ exists", "kind": "dir_exists", "path": d}, _exists(f"{d}/{name}"),
              _equals(f"{d}/{name}", word)]
    return Job({"d": d, "name": name, "word": word}, {}, checks, (f"mkdir -p {d}", f"echo {word} > {d}/{name}"), {})


def count_lines(rng: random.Random, p: Pools) -> Job:
    src, out = p.files(rng, 2)
    n = rng.randint(3, 9)
    body = "\n".join(p.word(rng) for _ in range(n)) + "\n"
    return Job({"src": src, "out": out}, {src: body}, [_exists(out), _number(out, n, "count correct")],
               (f"wc -l < {src} > {out}",), {})


def list_dir(rng: random.Random, p: Pools) -> Job:
    d, out = p.dir(rng), p.file(rng, "txt")
    names = sorted(f"{w}.txt" for w in p.sample(rng, rng.randint(2, 4)))
    checks = [_exists(out), {"name": "names listed", "kind": "lines_equal", "path": out, "lines": names}]
    return Job({"d": d, "out": out}, {f"{d}/{n}": "x\n" for n in names}, checks, (f"ls {d} > {out}",), {})


FAMILIES = (
    Family("write_word", "file_ops", write_word, trained=True),
    Family("touch_file", "file_ops", touch_file, trained=True),
    Family("delete_file", "file_ops", delete_file, trained=True),
    Family("rename_file", "file_ops", rename_file, trained=True),
    Family("copy_file", "file_ops", copy_file, trained=True),
    Family("overwrite", "text_edits", overwrite, trained=True),
    Family("csv_count_rows", "data_extraction", csv_count_rows, trained=True),
    Family("make_dir", "shell", make_dir, trained=False),
    Family("empty_file", "text_edits", empty_file, trained=False),
    Family("append_line", "text_edits", append_line, trained=False),
    Family("replace_word", "text_edits", replace_word, trained=False),
    Family("csv_header", "data_extraction", csv_header, trained=False),
    Family("csv_grep", "data_extraction", csv_grep, trained=False),
    Family("json_field", "data_extraction", json_field, trained=False),
    Family("csv_sum", "data_extraction", csv_sum, trained=False),
    Family("mkdir_write", "shell", mkdir_write, trained=False),
    Family("count_lines", "shell", count_lines, trained=False),
    Family("list_dir", "shell", list_dir, trained=False),
)
