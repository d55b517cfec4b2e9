"""Office- and job-style families (in the spirit of ClawGym-Bench's categories): each a multi-step
workspace job with named content checks read by step_checker.py.

| family        | category | job                                                             | trained |
|---------------|----------|-----------------------------------------------------------------|---------|
| region_report | analysis | markdown table of per-region totals from a CSV                  | yes     |
| error_codes   | systems  | the distinct error codes of a log, sorted, one per line         | yes     |
| json_table    | content  | a JSON list of records as a CSV table, columns in a given order | yes     |
| ini_key       | product  | change one key of one INI section, every other line byte-equal  | no      |
| fix_calc      | software | fix calc.py so that `python3 test_calc.py` passes               | no      |
| plan_order    | planning | order the tasks of a CSV so that each comes after what it needs | no      |

Each generator takes (rng, pools, split) and returns a families.Job; every name and value comes
from the seeded rng and the split's pools (error codes from the split's own number range).
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass
from typing import Any, Callable

from harnessrl.tasks.suite.calc import calc_job
from harnessrl.tasks.suite.families import Job
from harnessrl.tasks.suite.pools import Pools

CODE_RANGES = {"train": (100, 500), "test": (500, 800), "paraphrase": (800, 1000)}


@dataclass(frozen=True)
class OfficeFamily:
    name: str
    category: str
    make: Callable[[random.Random, Pools, str], Job]
    trained: bool
    steps: int  # how many things the job asks for, for the turn budget


def region_report(rng: random.Random, p: Pools, _split: str) -> Job:
    src, out = p.files(rng, 2, ("csv", "md"))
    n = rng.randint(3, 4)
    words = p.sample(rng, n + 3)
    regions, reps = words[:n], words[n:]
    rows = [(r, rng.choice(reps), rng.randint(5, 400)) for r in regions]
    rows += [(rng.choice(regions), rng.choice(reps), rng.randint(5, 400)) for _ in range(rng.randint(4, 8))]
    rng.shuffle(rows)
    totals = {r: sum(a for reg, _, a in rows if reg == r) for r in regions}
    csv_text = "region,rep,amount\n" + "".join(f"{r},{rep},{a}\n" for r, rep, a in rows)
    checks: list[dict[str, Any]] = [{"name": f"total of {r}", "kind": "md_row", "path": out, "key": r,
                                     "value": totals[r]} for r in sorted(regions)]
    checks.append({"name": "one row per region, sorted", "kind": "md_keys", "path": out, "keys": sorted(regions)})
    solution = (f"printf '| region | total |\\n|---|---|\\n' > {out} && tail -n +2 {src} | "
                f"awk -F, '{{s[$1]+=$3}} END {{for (r in s) print \"| \" r \" | \" s[r] \" |\"}}' | "
                f"LC_ALL=C sort >> {out}",)
    return Job({"src": src, "out": out}, {src: csv_text}, checks, solution,
               {"answer": totals, "regions": sorted(regions)})


def error_codes(rng: random.Random, p: Pools, split: str) -> Job:
    src, out = p.files(rng, 2, ("log", "txt"))
    lo, hi = CODE_RANGES.get(split, CODE_RANGES["test"])
    codes = [f"E{n}" for n in rng.sample(range(lo, hi), rng.randint(3, 5))]
    warns = [f"W{n}" for n in rng.sample(range(lo, hi), 2)]
    events = [("ERROR", c) for c in codes] + [("ERROR", rng.choice(codes)) for _ in range(rng.randint(2, 4))]
    events += [("WARN", rng.choice(warns)) for _ in range(rng.randint(2, 3))]
    events += [("INFO", "-") for _ in range(rng.randint(3, 6))]
    rng.shuffle(events)
    lines = []
    for i, (level, code) in enumerate(events):
        stamp = f"2025-0{rng.randint(1, 9)}-{rng.randint(10, 28)} {10 + i % 12}:{rng.randint(10, 59)}:{rng.randint(10, 59)}"
        what = {"ERROR": "failed on", "WARN": "slow reply from", "INFO": "request served for"}[level]
        lines.append(f"{stamp} {level} {code} {what} {p.word(rng)}")
    want = sorted(set(codes))
    checks = [{"name": "every distinct error code, once", "kind": "line_set", "path": out, "lines": want},
              {"name": "codes in sorted order", "kind": "lines_equal", "path": out, "lines": want}]
    solution = (f"grep ' ERROR ' {src} | awk '{{print $4}}' | LC_ALL=C sort -u > {out}",)
    return Job({"src": src, "out": out}, {src: "\n".join(lines) + "\n"}, checks, solution, {"answer": want})


def json_table(rng: random.Random, p: Pools, _split: str) -> Job:
    src, out = p.files(rng, 2, ("json", "csv"))
    fields = ["name"] + rng.sample(["qty", "price", "size", "weight", "stock"], 2)
    cols = fields[:]
    while cols == fields:
        rng.shuffle(cols)
    records = [{"name": w, **{f: rng.randint(1, 99) for f in sorted(fields[1:])}}
               for w in p.sample(rng, rng.randint(3, 5))]
    body = [",".join(str(r[c]) for c in cols) for r in records]
    checks = [{"name": "header row", "kind": "line_at", "path": out, "index": 0, "value": ",".join(cols)},
              {"name": "one row per record, in order", "kind": "lines_from", "path": out, "start": 1, "lines": body}]
    code = (f"import csv, json; rows = json.load(open('{src}')); w = csv.writer(open('{out}', 'w', newline=''), "
            f"lineterminator='\\n'); w.writerow({cols!r}); [w.writerow([r[c] for c in {cols!r}]) for r in rows]")
    return Job({"src": src, "out": out, "cols": ", ".join(cols)}, {src: json.dumps(records, indent=2) + "\n"},
               checks, (f'python3 -c "{code}"',), {"answer": body, "columns": cols})


SECTIONS = ("server", "database", "cache", "logging", "worker", "mailer")
_VALUES: dict[str, Callable[[random.Random, Pools], str]] = {
    "port": lambda r, p: str(r.randint(1000, 9999)),
    "timeout": lambda r, p: str(r.randint(5, 120)),
    "retries": lambda r, p: str(r.randint(1, 9)),
    "workers": lambda r, p: str(r.randint(1, 32)),
    "host": lambda r, p: f"{p.word(r)}.internal",
    "enabled": lambda r, p: r.choice(["true", "false"]),
}


def ini_key(rng: random.Random, p: Pools, _split: str) -> Job:
    name = p.file(rng, "ini")
    sections = rng.sample(SECTIONS, 3)
    key = rng.choice(sorted(_VALUES))
    lines = [f"; settings of the {p.word(rng)} service", ""]
    where: dict[str, int] = {}
    for s in sections:
        lines.append(f"[{s}]")
        for k in sorted({key, *rng.sample(sorted(_VALUES), 2)}):
            if k == key:
                where[s] = len(lines)
            lines.append(f"{k} = {_VALUES[k](rng, p)}")
        lines.append("")
    section = rng.choice(sections)
    old = lines[where[section]].split(" = ", 1)[1]
    new = old
    while new == old:
        new = _VALUES[key](rng, p)
    text = "\n".join(lines)
    value_check: dict[str, Any] = {"kind": "ini_value", "path": name, "section": section, "key": key, "value": new}
    checks: list[dict[str, Any]] = [{"name": f"{key} in [{section}] is {new}", **value_check},
              {"name": "every other line unchanged", "kind": "all", "checks": [value_check, {
                  "kind": "lines_except", "path": name, "lines": text.split("\n"), "index": where[section]}]}]
    solution = (f"sed -i '/^\\[{section}\\]$/,/^\\[/ s/^{key} = .*/{key} = {new}/' {name}",)
    return Job({"name": name, "section": section, "key": key, "value": new}, {name: text}, checks, solution,
               {"answer": new, "sha256": hashlib.sha256(text.encode()).hexdigest()})


def plan_order(rng: random.Random, p: Pools, _split: str) -> Job:
    """tasks.csv lists tasks with the task each one needs first (or -); the plan lists every task
    once, each after the one it needs. Several orders are right: the check reads the constraints."""
    src, out = p.files(rng, 2, ("csv", "txt"))
    names = p.sample(rng, rng.randint(5, 7))
    order = names[:]
    rng.shuffle(order)  # a hidden valid order: each task may need one that comes before it here
    needs: dict[str, str] = {}
    while sum(v != "-" for v in needs.values()) < 2:
        needs = {t: (rng.choice(order[:i]) if i and rng.random() < 0.8 else "-") for i, t in enumerate(order)}
    listed = names[:]
    # the CSV's own order breaks a constraint: copying its task column is never a plan
    while all(listed.index(needs[t]) < listed.index(t) for t in listed if needs[t] != "-"):
        rng.shuffle(listed)
    csv_text = "task,needs\n" + "".join(f"{t},{needs[t]}\n" for t in listed)
    pairs = [[needs[t], t] for t in listed if needs[t] != "-"]
    checks: list[dict[str, Any]] = [
        {"name": "every task once", "kind": "line_set", "path": out, "lines": names},
        {"name": "each task after the one it needs", "kind": "order_respects", "path": out, "items": names,
         "pairs": pairs}]
    code = ("import csv; rows = list(csv.DictReader(open('%s'))); done = []; "
            "left = [r for r in rows]\nwhile left:\n    r = next(r for r in left if r['needs'] in ('-', *done)); "
            "done.append(r['task']); left.remove(r)\nopen('%s', 'w').write(''.join(t + chr(10) for t in done))"
            % (src, out))
    return Job({"src": src, "out": out}, {src: csv_text}, checks, (f"python3 -c \"{code}\"",),
               {"answer": order, "pairs": pairs})


OFFICE_FAMILIES = (
    OfficeFamily("region_report", "analysis", region_report, trained=True, steps=3),
    OfficeFamily("error_codes", "systems", error_codes, trained=True, steps=3),
    OfficeFamily("json_table", "content", json_table, trained=True, steps=3),
    OfficeFamily("ini_key", "product", ini_key, trained=False, steps=2),
    OfficeFamily("fix_calc", "software", calc_job, trained=False, steps=3),
    OfficeFamily("plan_order", "planning", plan_order, trained=False, steps=2),
)
