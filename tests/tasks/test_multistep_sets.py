"""The broad-wording sets (tasks/suite/broad.py): builtin:lookup (read-then-act), builtin:jobs (k
file jobs) and builtin:wide (the trained file jobs). Counts and k per split, every reference
solution passes its own verifier and an untouched workspace fails, a wrong action fails, the note
must be read (the answer is never in the instruction), and the real verifier path agrees."""

from __future__ import annotations

import json
import subprocess
import warnings
from pathlib import Path
from typing import Any

import pytest

from harnessrl.tasks import load_tasks
from harnessrl.tasks.files import write_tree
from harnessrl.tasks.model import Task, TaskError
from harnessrl.tasks.suite import checker, step_checker
from harnessrl.tasks.suite.base import checker_source
from harnessrl.tasks.suite.broad_sets import BROAD_SETS
from harnessrl.rollout.task_sandbox import validate_task
from harnessrl.sandbox.base import SandboxConfig
from tests.tasks.test_chains import assert_existence_pays_nothing

SETS = {s: load_tasks(f"builtin:{s}") for s in BROAD_SETS}
ALL = [t for ts in SETS.values() for t in ts]


def _score(task: Task, root: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, float]:
    """The task's checks scored in-process by its own checker module (the suite's or the step checker)."""
    module = checker if task.verifier.files["verify.py"] == checker_source() else step_checker
    monkeypatch.chdir(root)
    return {c["name"]: float(bool(module.score(c))) for c in json.loads(task.verifier.files["checks.json"])}


def _run(task: Task, root: Path, commands: tuple[str, ...] | list[str]) -> Path:
    write_tree(root, task.files)
    for cmd in commands:
        subprocess.run(["bash", "-c", cmd], cwd=root, check=True, capture_output=True)
    return root


def test_counts_and_k_per_split():
    splits = {s: {t.split for t in ts} for s, ts in SETS.items()}
    assert splits == {"wide": {"train", "test", "reworded", "style"},
                      "lookup": {"train", "test", "long", "reworded", "style"},
                      "jobs": {"train", "test", "long", "reworded", "style"}}
    ks = {(s, t.split): set() for s, ts in SETS.items() for t in ts}
    for s, ts in SETS.items():
        for t in ts:
            ks[(s, t.split)].add(t.metadata["k"])
    assert ks[("lookup", "train")] == ks[("lookup", "test")] == ks[("lookup", "style")] == {2}
    assert ks[("lookup", "long")] == {3} and ks[("jobs", "long")] == {3, 4} and ks[("jobs", "train")] == {2}
    assert len(load_tasks("builtin:lookup:train")) == 48 and len(load_tasks("builtin:jobs:style")) == 16
    assert len({t.id for t in ALL}) == len(ALL)
    for t in ALL:
        assert len(t.reference_solution) == t.metadata["k"], t.id  # one command a call
        assert t.metadata.get("max_turns", 3) >= t.metadata["k"] + 1
    with pytest.raises(TaskError, match="unknown lookup split"):
        load_tasks("builtin:lookup:paraphrase")


def test_every_reference_passes_and_untouched_fails(tmp_path, monkeypatch):
    for t in ALL:
        untouched = _score(t, _run(t, tmp_path / t.id / "u", ()), monkeypatch)
        assert min(untouched.values()) == 0.0, (t.id, untouched)
        solved = _score(t, _run(t, tmp_path / t.id / "r", t.reference_solution), monkeypatch)
        assert set(solved.values()) == {1.0}, (t.id, t.reference_solution, solved)


def _wrong(task: Task) -> list[str]:
    """The reference with its action on the wrong file or word (lookup), or one job left out (jobs)."""
    if task.category != "lookup":
        return list(task.reference_solution[:-1])
    *reads, action = task.reference_solution
    kind, answer = task.metadata["action"], task.metadata["answer"]
    decoy = sorted(p for p in task.files if p not in task.metadata["notes"] and p != answer)[0]
    wrong = {"delete": f"rm {decoy}", "copy": f"cp {decoy} {task.metadata['out']}",
             "write": f"echo {decoy.split('.')[0]} > {task.metadata['out']}"}[kind]
    assert wrong != action
    return [*reads, wrong]


def test_a_wrong_action_fails(tmp_path, monkeypatch):
    for t in SETS["lookup"] + SETS["jobs"]:
        scores = _score(t, _run(t, tmp_path / t.id, _wrong(t)), monkeypatch)
        assert min(scores.values()) == 0.0, (t.id, _wrong(t), scores)
    for t in SETS["lookup"]:  # deleting every file but the note, or copying each candidate in turn
        others = [p for p in sorted(t.files) if p not in t.metadata["notes"]]
        blunt = {"delete": [f"rm {p}" for p in others], "write": [f"cat {p} > {t.metadata['out']}" for p in others],
                 "copy": [f"cp {p} {t.metadata['out']}" for p in others if p != t.metadata["answer"]]}
        scores = _score(t, _run(t, tmp_path / t.id / "blunt", blunt[t.metadata["action"]]), monkeypatch)
        assert min(scores.values()) == 0.0, (t.id, scores)


def test_lookup_needs_the_note(tmp_path, monkeypatch):
    for t in SETS["lookup"]:
        answer = t.metadata["answer"]
        assert answer not in t.instruction, t.id
        notes = t.metadata["notes"]
        assert t.reference_solution[:len(notes)] == tuple(f"cat {n}" for n in notes)
        assert notes[0] in t.instruction and all(n not in t.instruction for n in notes[1:])
        assert answer in t.files[notes[-1]].decode() and all(answer not in t.files[n].decode() for n in notes[:-1])
    assert_existence_pays_nothing(SETS["lookup"], tmp_path, monkeypatch)


def test_jobs_are_independent_and_in_the_instruction():
    for t in SETS["jobs"]:
        assert len(set(t.metadata["jobs"])) == t.metadata["k"] == len(t.reference_solution)
        names = {c["name"].split(":")[0] for c in json.loads(t.verifier.files["checks.json"])}
        assert names == {f"job {i + 1}" for i in range(t.metadata["k"])}


def test_the_real_verifier_path_agrees():
    """validate_task in local sandboxes: the verifier as a rollout runs it (untouched fails, reference passes)."""
    picks = [ts[i] for ts in SETS.values() for i in (0, 1, 2, len(ts) - 1)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = [validate_task(t, SandboxConfig(type="local")) for t in picks]
    assert [r.error for r in results if not r.ok] == []
    assert all(r.untouched.status == "ok" and r.reference is not None and r.reference.reward == 1.0 for r in results)


def test_held_out_splits_share_no_task_with_train():
    for s, ts in SETS.items():
        train = {t.instruction for t in ts if t.split == "train"}
        assert not train & {t.instruction for t in ts if t.split != "train"}, s
        names: Any = {p for t in ts if t.split == "train" for p in t.files}
        held = {p for t in ts if t.split in ("reworded",) for p in t.files}
        assert not names & held, s
