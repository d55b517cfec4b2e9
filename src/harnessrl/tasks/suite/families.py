"""The family generators of the built-in suite: four categories, 18 families from one-command jobs
(touch, mkdir, rm, echo) that the small default model sometimes gets right to multi-step or
data jobs (sums, JSON fields) that it does not: RL has signal at both ends.

Each generator takes (rng, split) and returns a Draft: instruction, starting files, named checks
(partial credit; a task passes when all checks pass) and a reference solution in shell commands.
Phrasings: the last one of each list is reserved for the held-out test split.
"""

from __future__ import annotations

import json
import random

from harnessrl.tasks.suite.base import DIRS, STEMS, WORDS, Draft, Family, fname, pick, pick_phrasing


def _exists(path: str) -> dict:
    return {"name": f"{path} exists", "kind": "file_exists", "path": path}


def _equals(path: str, value: str, name: str = "") -> dict:
    return {"name": name or f"{path} holds {value!r}", "kind": "text_equals", "path": path, "value": value}


# -- file operations --------------------------------------------------------------------------

def write_word(rng: random.Random, split: str) -> Draft:
    word, name = pick(rng, WORDS, split)[0], fname(rng, split)
    text = pick_phrasing(rng, [
        "Create a file named {name} that contains the word {word}.",
        "Write the word {word} into a new file called {name}.",
        "Make a file {name} whose only content is the word {word}.",
        "Put the word {word} in a file named {name}.",
    ], split)
    return Draft(text.format(name=name, word=word), {}, [_exists(name), _equals(name, word)],
                 (f"echo {word} > {name}",), {"word": word, "file": name})


def touch_file(rng: random.Random, split: str) -> Draft:
    name = fname(rng, split)
    text = pick_phrasing(rng, [
        "Create an empty file named {name}.",
        "Make a new empty file called {name}.",
        "Create the file {name}; it can stay empty.",
        "Create a new empty file {name}.",
    ], split)
    return Draft(text.format(name=name), {}, [_exists(name)], (f"touch {name}",), {})


def delete_file(rng: random.Random, split: str) -> Draft:
    name, keep = (f"{s}.txt" for s in pick(rng, STEMS, split, 2))
    text = pick_phrasing(rng, [
        "Delete the file {name}.",
        "Remove {name} from the current directory.",
        "Erase the file {name}.",
        "Delete {name}.",
    ], split)
    checks = [{"name": f"{name} is gone", "kind": "file_absent", "path": name},
              _equals(keep, "keep me", f"{keep} kept")]
    return Draft(text.format(name=name), {name: "old\n", keep: "keep me\n"}, checks, (f"rm {name}",), {})


def copy_file(rng: random.Random, split: str) -> Draft:
    src, dst = (f"{s}.txt" for s in pick(rng, {"train": ["a", "b", "c", "d"], "test": ["x", "y", "z"]}, split, 2))
    body = " ".join(pick(rng, WORDS, split, 3))
    text = pick_phrasing(rng, [
        "Copy the file {src} to a file named {dst}.",
        "Make a copy of {src} called {dst}.",
        "Duplicate {src} as {dst}.",
        "Copy {src} to a new file {dst}.",
    ], split)
    checks = [_exists(dst), _equals(dst, body, "copy has the same text"), _equals(src, body, "original kept")]
    return Draft(text.format(src=src, dst=dst), {src: body + "\n"}, checks, (f"cp {src} {dst}",), {})


def rename_file(rng: random.Random, split: str) -> Draft:
    src, dst = fname(rng, split), f"{pick(rng, WORDS, split)[0]}.txt"
    body = " ".join(pick(rng, WORDS, split, 2))
    text = pick_phrasing(rng, [
        "Rename the file {src} to {dst}.",
        "Move {src} to the new name {dst}.",
        "Change the name of {src} to {dst}.",
        "Rename the file {src} so that it is called {dst}.",
    ], split)
    checks = [_equals(dst, body, "renamed file has the text"),
              {"name": f"{src} is gone", "kind": "file_absent", "path": src}]
    return Draft(text.format(src=src, dst=dst), {src: body + "\n"}, checks, (f"mv {src} {dst}",), {})


# -- text edits -------------------------------------------------------------------------------

def overwrite(rng: random.Random, split: str) -> Draft:
    name, (word, old) = fname(rng, split), pick(rng, WORDS, split, 2)
    text = pick_phrasing(rng, [
        "Replace the contents of {name} with the single word {word}.",
        "Overwrite {name} so that it contains only the word {word}.",
        "Change the text of {name} to just {word}.",
        "Replace the text in {name} with the word {word}.",
    ], split)
    checks = [_equals(name, word), {"name": "old text removed", "kind": "text_lacks", "path": name, "value": old}]
    return Draft(text.format(name=name, word=word), {name: f"{old} {old}\n"}, checks, (f"echo {word} > {name}",), {})


def empty_file(rng: random.Random, split: str) -> Draft:
    name, words = fname(rng, split), pick(rng, WORDS, split, 3)
    text = pick_phrasing(rng, [
        "Remove all the text from {name} but keep the file.",
        "Make {name} an empty file (do not delete it).",
        "Clear the contents of {name}; the file must stay.",
        "Erase the text inside {name}, keeping the file itself.",
    ], split)
    checks = [_exists(name), _equals(name, "", "file is empty")]
    return Draft(text.format(name=name), {name: " ".join(words) + "\n"}, checks, (f"truncate -s 0 {name}",), {})


def append_line(rng: random.Random, split: str) -> Draft:
    name, words = fname(rng, split), pick(rng, WORDS, split, 3)
    text = pick_phrasing(rng, [
        "Add a line with the word {w} to the end of {name}.",
        "Append the line {w} to the file {name}.",
        "At the bottom of {name}, add one more line: {w}",
        "Append the word {w} as a new line at the end of {name}.",
    ], split)
    checks = [{"name": "new last line", "kind": "last_line", "path": name, "value": words[2]},
              {"name": "old lines kept", "kind": "lines_equal", "path": name, "lines": words}]
    return Draft(text.format(name=name, w=words[2]), {name: f"{words[0]}\n{words[1]}\n"}, checks,
                 (f"echo {words[2]} >> {name}",), {})


def replace_word(rng: random.Random, split: str) -> Draft:
    name, (old, new, other) = fname(rng, split), pick(rng, WORDS, split, 3)
    body = f"the {old} is next to the {other}"
    text = pick_phrasing(rng, [
        "In the file {name}, replace the word {old} with {new}.",
        "Edit {name}: change {old} to {new}.",
        "Substitute {new} for {old} in {name}.",
        "Replace the word {old} with {new} in {name}.",
    ], split)
    checks = [{"name": f"{old} removed", "kind": "text_lacks", "path": name, "value": old},
              {"name": f"{new} present", "kind": "text_contains", "path": name, "value": new},
              _equals(name, body.replace(old, new), "rest unchanged")]
    return Draft(text.format(name=name, old=old, new=new), {name: body + "\n"}, checks,
                 (f"sed -i 's/{old}/{new}/g' {name}",), {})


# -- data extraction (CSV / JSON) -------------------------------------------------------------

def csv_header(rng: random.Random, split: str) -> Draft:
    src, out = fname(rng, split, "csv"), fname(rng, split, "txt")
    cols = pick(rng, WORDS, split, 3)
    rows = [",".join(cols)] + [",".join(str(rng.randint(1, 99)) for _ in cols) for _ in range(3)]
    text = pick_phrasing(rng, [
        "Write the header row of the CSV file {src} to {out}.",
        "Copy the first line of {src} into a file named {out}.",
        "Save the column names line of {src} to {out}.",
        "Put the first line of {src} into {out}.",
    ], split)
    return Draft(text.format(src=src, out=out), {src: "\n".join(rows) + "\n"},
                 [_exists(out), _equals(out, rows[0], "header written")], (f"head -n 1 {src} > {out}",), {})


def csv_count_rows(rng: random.Random, split: str) -> Draft:
    src, out = fname(rng, split, "csv"), "rows.txt" if split == "train" else "count.txt"
    names = pick(rng, WORDS, split, rng.randint(2, 6))
    rows = ["name,size"] + [f"{n},{rng.randint(1, 50)}" for n in names]
    text = pick_phrasing(rng, [
        "Count the rows of {src}, header included, and save the number in {out}.",
        "How many lines does the CSV file {src} have? Write the number into {out}.",
        "Write the number of rows in {src} (counting the header) to {out}.",
        "Save the number of lines of {src} in {out}.",
    ], split)
    checks = [_exists(out), {"name": "row count", "kind": "number_equals", "path": out, "value": len(rows)}]
    return Draft(text.format(src=src, out=out), {src: "\n".join(rows) + "\n"}, checks, (f"wc -l < {src} > {out}",), {})


def csv_grep(rng: random.Random, split: str) -> Draft:
    src, out = fname(rng, split, "csv"), "matches.txt" if split == "train" else "found.txt"
    names = pick(rng, WORDS, split, 4)
    colors = [rng.choice(["red", "blue", "green"]) for _ in names]
    target = names[rng.randrange(len(names))]
    rows = ["name,color"] + [f"{n},{c}" for n, c in zip(names, colors)]
    text = pick_phrasing(rng, [
        "Save the lines of {src} that contain {word} into {out}.",
        "Find the rows of {src} with the word {word} and write them to {out}.",
        "Copy every line of {src} that mentions {word} into {out}.",
        "Write the lines of {src} that contain the word {word} to {out}.",
    ], split)
    checks = [_exists(out), {"name": "matching rows", "kind": "lines_equal", "path": out,
                             "lines": [r for r in rows if target in r]}]
    return Draft(text.format(src=src, word=target, out=out), {src: "\n".join(rows) + "\n"}, checks,
                 (f"grep {target} {src} > {out}",), {})


def json_field(rng: random.Random, split: str) -> Draft:
    src, out = fname(rng, split, "json"), "answer.txt" if split == "train" else "result.txt"
    data = {"name": pick(rng, WORDS, split)[0], "color": rng.choice(["red", "blue", "green", "gold"]),
            "size": rng.randint(2, 90)}
    key = rng.choice(sorted(data))
    text = pick_phrasing(rng, [
        "Read {src} and write the value of its \"{key}\" field into {out}.",
        "The JSON file {src} has a field named {key}. Save that field's value in {out}.",
        "Extract the {key} value from {src} and store it in {out}.",
        "Look up the \"{key}\" entry in {src} and write it to {out}.",
    ], split)
    solution = (f"python3 -c \"import json; print(json.load(open('{src}'))['{key}'])\" > {out}",)
    return Draft(text.format(src=src, key=key, out=out), {src: json.dumps(data, indent=2) + "\n"},
                 [_exists(out), _equals(out, str(data[key]), "value written")], solution, {"key": key})


def csv_sum(rng: random.Random, split: str) -> Draft:
    src, out = fname(rng, split, "csv"), "total.txt" if split == "train" else "sum.txt"
    items = pick(rng, WORDS, split, rng.randint(3, 5))
    qty = [rng.randint(1, 20) for _ in items]
    rows = ["item,qty"] + [f"{i},{q}" for i, q in zip(items, qty)]
    text = pick_phrasing(rng, [
        "Add up the qty column of {src} and write the total into {out}.",
        "Compute the sum of all qty values in {src}; save the number in {out}.",
        "What is the total qty in {src}? Write just the number to {out}.",
        "Sum the qty column of the CSV file {src} and put the result in {out}.",
    ], split)
    solution = (f"awk -F, 'NR>1 {{s+=$2}} END {{print s}}' {src} > {out}",)
    checks = [_exists(out), {"name": "total correct", "kind": "number_equals", "path": out, "value": sum(qty)}]
    return Draft(text.format(src=src, out=out), {src: "\n".join(rows) + "\n"}, checks, solution, {})


# -- shell and multi-step jobs ----------------------------------------------------------------

def make_dir(rng: random.Random, split: str) -> Draft:
    d = pick(rng, DIRS, split)[0]
    text = pick_phrasing(rng, [
        "Create a directory named {d}.",
        "Make a new folder called {d}.",
        "Create the folder {d}.",
        "Make a directory called {d}.",
    ], split)
    return Draft(text.format(d=d), {}, [{"name": f"{d}/ exists", "kind": "dir_exists", "path": d}],
                 (f"mkdir {d}",), {})


def mkdir_write(rng: random.Random, split: str) -> Draft:
    d, name, word = pick(rng, DIRS, split)[0], fname(rng, split), pick(rng, WORDS, split)[0]
    text = pick_phrasing(rng, [
        "Create a directory named {d} and inside it a file {name} containing the word {word}.",
        "Make a folder {d}, then write the word {word} into {d}/{name}.",
        "Create the file {d}/{name} (make the {d} directory first) with the word {word} in it.",
        "Create a directory {d} and write the word {word} into the file {d}/{name}.",
    ], split)
    checks = [{"name": f"{d}/ exists", "kind": "dir_exists", "path": d}, _exists(f"{d}/{name}"),
              _equals(f"{d}/{name}", word)]
    return Draft(text.format(d=d, name=name, word=word), {}, checks,
                 (f"mkdir -p {d}", f"echo {word} > {d}/{name}"), {})


def count_lines(rng: random.Random, split: str) -> Draft:
    src, out = fname(rng, split), "count.txt" if split == "train" else "lines.txt"
    n = rng.randint(3, 9)
    body = "\n".join(rng.choice(WORDS[split]) for _ in range(n)) + "\n"
    text = pick_phrasing(rng, [
        "Count the lines of {src} and write the count into {out}.",
        "How many lines does {src} have? Write the number to {out}.",
        "Save the number of lines in {src} to the file {out}.",
        "Count the lines in {src} and save the number in {out}.",
    ], split)
    checks = [_exists(out), {"name": "count correct", "kind": "number_equals", "path": out, "value": n}]
    return Draft(text.format(src=src, out=out), {src: body}, checks, (f"wc -l < {src} > {out}",), {})


def list_dir(rng: random.Random, split: str) -> Draft:
    d, out = pick(rng, DIRS, split)[0], "files.txt" if split == "train" else "listing.txt"
    names = sorted(f"{w}.txt" for w in pick(rng, WORDS, split, rng.randint(2, 4)))
    text = pick_phrasing(rng, [
        "Write the names of the files in the directory {d}, one per line, into {out}.",
        "List the files inside {d} and save that list to {out}.",
        "Put the file names found in {d}/ into {out}, one name per line.",
        "List the files in the {d} directory and save the list in {out}.",
    ], split)
    checks = [_exists(out), {"name": "names listed", "kind": "lines_equal", "path": out, "lines": names}]
    return Draft(text.format(d=d, out=out), {f"{d}/{n}": "x\n" for n in names}, checks, (f"ls {d} > {out}",), {})


FAMILIES = (
    Family("write_word", "file_ops", write_word),
    Family("touch_file", "file_ops", touch_file),
    Family("delete_file", "file_ops", delete_file),
    Family("copy_file", "file_ops", copy_file),
    Family("rename_file", "file_ops", rename_file),
    Family("overwrite", "text_edits", overwrite),
    Family("empty_file", "text_edits", empty_file),
    Family("append_line", "text_edits", append_line),
    Family("replace_word", "text_edits", replace_word),
    Family("csv_header", "data_extraction", csv_header),
    Family("csv_count_rows", "data_extraction", csv_count_rows),
    Family("csv_grep", "data_extraction", csv_grep),
    Family("json_field", "data_extraction", json_field),
    Family("csv_sum", "data_extraction", csv_sum),
    Family("make_dir", "shell", make_dir),
    Family("mkdir_write", "shell", mkdir_write),
    Family("count_lines", "shell", count_lines),
    Family("list_dir", "shell", list_dir),
)
