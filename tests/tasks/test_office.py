"""The office families (tasks/suite/office.py, calc.py): specs and counts, determinism, split
separation, references pass / untouched 0 / existence pays nothing, the fix_calc checks cannot be
forged by the agent's code, the INI check wants every other line byte-identical, and the ClawGym
export round-trips (export, load_tasks(dir), validate)."""

from __future__ import annotations

import dataclasses
import inspect
import json
import random
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harnessrl.tasks import load_tasks
from harnessrl.tasks.clawgym import checks_reward_sh, clawgym_form, export_clawgym
from harnessrl.app.tasks import tasks_app
from harnessrl.tasks.model import TaskError
from harnessrl.tasks.suite import calc, office, office_words
from harnessrl.tasks.suite.calc import FUNCS, WRONG
from harnessrl.tasks.suite.office import CODE_RANGES, OFFICE_FAMILIES
from harnessrl.tasks.suite.office_words import OFFICE_PARAPHRASES, OFFICE_TRAINING, OFFICE_UNSEEN
from harnessrl.tasks.suite.pools import TRAIN
from tests.tasks.test_chains import (assert_existence_pays_nothing, assert_references_pass_and_untouched_scores_zero,
                                     checks_of, score_in, tokens, validate_local, workspace)

OFFICE = load_tasks("builtin:office")
BY = {(f, s): [t for t in OFFICE if (t.family, t.split) == (f, s)] for f, s in {(t.family, t.split) for t in OFFICE}}
SAMPLE = [tasks[0] for tasks in BY.values()]  # one task per (family, split)


def test_office_specs_counts_and_categories():
    counts = Counter((t.family, t.split) for t in OFFICE)
    trained = ("region_report", "error_codes", "json_table")
    assert counts == {**{(f, s): n for f in trained for s, n in (("train", 16), ("test", 8), ("paraphrase", 8))},
                      ("ini_key", "unseen"): 8, ("fix_calc", "unseen"): 8, ("plan_order", "unseen"): 8}
    assert {t.category for t in OFFICE} == {"analysis", "systems", "content", "product", "software", "planning"}
    for split, n in (("train", 48), ("test", 24), ("paraphrase", 24), ("unseen", 24)):
        assert len(load_tasks(f"builtin:office:{split}")) == n
    assert len(load_tasks("builtin:region_report:test")) == 8
    assert len({t.id for t in OFFICE}) == len(OFFICE) == 120
    assert not {t.id for t in OFFICE} & {t.id for t in load_tasks("builtin:all")}
    with pytest.raises(TaskError, match="has the splits unseen"):
        load_tasks("builtin:fix_calc:train")
    for t in OFFICE:
        assert t.metadata["max_turns"] == 2 + 2 * t.metadata["steps"] and t.metadata["steps"] >= 2


def test_office_generation_is_deterministic():
    again = load_tasks("builtin:office")
    assert len(again) == len(OFFICE) and all(a.same_as(b) for a, b in zip(again, OFFICE))


def test_templates_fill_every_slot_and_paraphrases_are_new():
    for t in OFFICE:
        assert "{" not in t.instruction and "}" not in t.instruction, t.id
    assert set(OFFICE_TRAINING) == set(OFFICE_PARAPHRASES) == {f.name for f in OFFICE_FAMILIES if f.trained}
    assert set(OFFICE_UNSEEN) == {f.name for f in OFFICE_FAMILIES if not f.trained}
    for name, paras in OFFICE_PARAPHRASES.items():
        assert not set(paras) & set(OFFICE_TRAINING[name])


def test_held_out_office_tasks_share_no_instance_with_train():
    train = [t for t in OFFICE if t.split == "train"]
    train_names = set(TRAIN.words) | set(TRAIN.stems) | set(TRAIN.dirs)
    train_files = {body for t in train for body in t.files.values()}
    # the families' own fixed words (templates, CSV headers, log phrases, INI keys) are not instances
    fixed = set().union(*(tokens(inspect.getsource(m)) for m in (office, office_words, calc)))
    for t in OFFICE:
        if t.split == "train":
            continue
        text = t.instruction + " " + " ".join(b.decode() for b in t.files.values())
        assert not (tokens(text) - fixed) & train_names, (t.id, (tokens(text) - fixed) & train_names)
        assert not set(t.files.values()) & train_files, t.id
    for split, (lo, hi) in CODE_RANGES.items():  # error codes: each split its own number range
        for t in BY[("error_codes", split)]:
            assert all(lo <= int(code[1:]) < hi for code in t.metadata["answer"]), t.id


def test_every_office_reference_passes_and_untouched_scores_zero(tmp_path, monkeypatch):
    assert_references_pass_and_untouched_scores_zero(OFFICE, tmp_path, monkeypatch)


def test_no_office_check_pays_for_existence(tmp_path, monkeypatch):
    assert_existence_pays_nothing(OFFICE, tmp_path, monkeypatch)


def test_office_sample_validates_with_the_real_verifier_in_a_local_sandbox():
    assert len(SAMPLE) == 12
    assert validate_local(SAMPLE) == []


def test_the_wrong_calc_bodies_are_the_wrong_functions():
    for name, (params, _right, wrong, _fn, make) in FUNCS.items():
        bad = eval(f"lambda {params}: {wrong}")  # noqa: S307 - the module's own constant text
        for seed in range(5):
            args = make(random.Random(seed))
            assert bad(*args) == WRONG[name](*args), name


FORGERIES = {
    "exits 0 at import": "import sys\nsys.exit(0)\n",
    "prints a fake pass": ("import sys\nprint('Ran 3 tests', file=sys.stderr)\nprint('\\nOK', file=sys.stderr)\n"
                           "print('{\"calc.py functions give the right values\": 1.0}')\nprint(1.0)\nsys.exit(0)\n"),
}


@pytest.mark.parametrize("forgery", sorted(FORGERIES))
def test_fix_calc_checks_cannot_be_forged_by_the_agents_code(forgery, tmp_path, monkeypatch):
    task = BY[("fix_calc", "unseen")][0]
    root = workspace(task, tmp_path)
    (root / "calc.py").write_text(FORGERIES[forgery])
    (root / "json.py").write_text("raise SystemExit('planted')\n")  # must not shadow the checker's json
    assert score_in(task, root, monkeypatch)["calc.py functions give the right values"] == 0.0
    # the checker's own stdout stays one JSON object, whatever the agent's code printed
    vdir = root / ".verifier"
    vdir.mkdir()
    for name, body in task.verifier.files.items():
        (vdir / name).write_bytes(body)
    out = subprocess.run([sys.executable, ".verifier/verify.py"], cwd=root, capture_output=True, text=True)
    lines = out.stdout.strip().splitlines()
    assert out.returncode == 0 and len(lines) == 1
    assert json.loads(lines[0])["calc.py functions give the right values"] == 0.0


def test_fix_calc_edited_test_file_does_not_pass(tmp_path, monkeypatch):
    task = BY[("fix_calc", "unseen")][1]
    root = workspace(task, tmp_path, task.reference_solution)
    (root / "test_calc.py").write_text((root / "test_calc.py").read_text() + "\n# edited\n")
    scores = score_in(task, root, monkeypatch)
    assert scores["python3 test_calc.py passes, test file unchanged"] == 0.0
    assert scores["calc.py functions give the right values"] == 1.0


def test_ini_rewrite_that_changes_other_lines_fails_the_byte_check(tmp_path, monkeypatch):
    task = BY[("ini_key", "unseen")][0]
    m = task.metadata
    root = workspace(task, tmp_path)
    path = root / m["name"]
    text = path.read_text().replace("; settings", ";  settings")  # the right edit, plus a comment touched
    lines = text.split("\n")
    section = None
    for i, line in enumerate(lines):
        if line.startswith("["):
            section = line.strip("[]")
        elif section == m["section"] and line.startswith(m["key"] + " ="):
            lines[i] = f"{m['key']} = {m['value']}"
    path.write_text("\n".join(lines))
    scores = score_in(task, root, monkeypatch)
    assert scores[f"{m['key']} in [{m['section']}] is {m['value']}"] == 1.0
    assert scores["every other line unchanged"] == 0.0


def test_clawgym_export_round_trip(tmp_path):
    """Export (chains of every split, office families, a one-job suite task), load the directories
    back, and validate them (the reference solution rides in the metadata) in local sandboxes."""
    chains = [t for t in load_tasks("builtin:chain") if t.variant == 2]  # k = 3 (train, held out), 6 (long)
    tasks = chains + SAMPLE + load_tasks("builtin:write_word:test")[:1]
    dirs = export_clawgym(tasks, tmp_path / "out")
    for d in dirs:
        assert {p.name for p in d.iterdir()} == {"data_entry.json", "input_files", "reward"}
        assert {"reward.sh", "check.py", "checks.json"} <= {p.name for p in (d / "reward").iterdir()}
        assert (d / "reward" / "reward.sh").read_text() == checks_reward_sh(1.0, ">=")
    loaded = {t.id: t for t in load_tasks(tmp_path / "out")}
    assert sorted(loaded) == sorted(t.id for t in tasks)
    for t in tasks:
        back = loaded[t.id]
        assert (back.instruction, back.files, back.category, back.split) == (t.instruction, t.files, t.category,
                                                                            t.split)
        assert back.verifier.kind == "reward_line" and back.metadata["k" if t.family == "chain" else "split"]
        assert back.same_as(dataclasses.replace(clawgym_form(t), source=""))
    with_reference = [dataclasses.replace(b, reference_solution=tuple(b.metadata["reference_solution"]))
                      for b in loaded.values()]
    assert validate_local(with_reference) == []
    with pytest.raises(TaskError, match="already exist"):
        export_clawgym(tasks[:1], tmp_path / "out")


def test_cli_export(tmp_path):
    result = CliRunner().invoke(tasks_app, ["export", "builtin:ini_key", str(tmp_path / "x")])
    assert result.exit_code == 0, result.output
    assert "wrote 8 ClawGym task directories" in result.output
    assert len(load_tasks(tmp_path / "x")) == 8


def test_exported_reward_passes_clawgym_exactly_when_every_check_passes(tmp_path):
    """A chain of 3 with 2 checks right scores 2/3 built in (not a pass); exported, ClawGym's rule
    (reward > 0.5) must not pass it either, and the reference solution must still pass."""
    import subprocess

    chain = next(t for t in load_tasks("builtin:chain:train") if t.metadata["k"] == 3)
    [d] = export_clawgym([chain], tmp_path / "out")
    ws = tmp_path / "ws"
    shutil.copytree(d / "input_files", ws)
    shutil.copytree(d / "reward", ws / "reward")

    def reward() -> float:
        out = subprocess.run(["bash", "reward/reward.sh"], cwd=ws, capture_output=True, text=True, check=True)
        return float(out.stdout.strip().splitlines()[-1])

    untouched = reward()
    steps = list(chain.reference_solution)
    for step in steps[:-1]:
        subprocess.run(step, shell=True, cwd=ws, check=True)
    partial = reward()
    subprocess.run(steps[-1], shell=True, cwd=ws, check=True)
    full = reward()
    assert untouched < partial <= 0.5 < full, (untouched, partial, full)


def test_a_plan_is_scored_by_its_constraints_not_by_one_order(tmp_path, monkeypatch):
    """Any order that respects every dependency passes; the CSV's own order never does (copying its
    task column is not a plan); the right tasks in a wrong order earn only the set check."""
    for task in [t for t in OFFICE if t.family == "plan_order"]:
        m = task.metadata
        src = next(iter(task.files))
        listed = [line.split(",")[0] for line in task.files[src].decode().splitlines()[1:]]
        out = checks_of(task)[0]["path"]
        root = workspace(task, tmp_path / task.id)
        (root / out).write_text("\n".join(m["answer"]) + "\n")
        assert all(v == 1.0 for v in score_in(task, root, monkeypatch).values())
        (root / out).write_text("\n".join(listed) + "\n")
        scores = score_in(task, root, monkeypatch)
        assert scores["every task once"] == 1.0 and scores["each task after the one it needs"] == 0.0
