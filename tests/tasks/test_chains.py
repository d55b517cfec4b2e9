"""The chain family (tasks/suite/chains.py): specs and counts, deterministic generation, k and
max_turns in the metadata, split separation, every reference passes and an untouched workspace
scores 0 on every check, and no check pays for a file merely existing. The helpers here are shared
with test_office.py."""

from __future__ import annotations

import json
import re
import subprocess
import warnings
from pathlib import Path
from typing import Any

import pytest

from harnessrl.sandbox.base import SandboxConfig
from harnessrl.tasks import load_tasks
from harnessrl.tasks.files import write_tree
from harnessrl.tasks.model import Task, TaskError
from harnessrl.tasks.suite import step_checker
from harnessrl.tasks.suite.chain_words import PARAPHRASE_CLAUSES, TRAINING_CLAUSES
from harnessrl.tasks.suite.chains import CHAIN_SPLITS
from harnessrl.tasks.suite.pools import TRAIN
from harnessrl.tasks.suite.steps import TRAINED_STEPS, UNSEEN_STEPS
from harnessrl.rollout.task_sandbox import validate_task

CHAINS = {s: load_tasks(f"builtin:chain:{s}") for s in CHAIN_SPLITS}
ALL_CHAINS = [t for tasks in CHAINS.values() for t in tasks]
HELD_OUT = ("test", "long", "unseen", "paraphrase")


# -- helpers (also used by test_office.py) ------------------------------------------------------

def checks_of(task: Task) -> list[dict[str, Any]]:
    return json.loads(task.verifier.files["checks.json"])


def _paths(check: dict[str, Any]) -> set[str]:
    inner = check.get("checks", [])
    return ({check["path"]} if "path" in check else set()).union(*(_paths(c) for c in inner))


def output_paths(task: Task) -> set[str]:
    """Every path a check of the task looks at."""
    return set().union(*(_paths(c) for c in checks_of(task)))


def score_in(task: Task, workspace: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, float]:
    """The task's checks on a workspace, scored in-process by the step checker (fast)."""
    monkeypatch.chdir(workspace)
    return {c["name"]: float(bool(step_checker.score(c))) for c in checks_of(task)}


def workspace(task: Task, root: Path, commands: tuple[str, ...] = ()) -> Path:
    write_tree(root, task.files)
    for cmd in commands:
        subprocess.run(["bash", "-c", cmd], cwd=root, check=True, capture_output=True)
    return root


def assert_references_pass_and_untouched_scores_zero(tasks: list[Task], tmp_path: Path, monkeypatch) -> None:
    for t in tasks:
        untouched = score_in(t, workspace(t, tmp_path / t.id / "u"), monkeypatch)
        assert set(untouched.values()) == {0.0}, (t.id, untouched)
        solved = score_in(t, workspace(t, tmp_path / t.id / "r", t.reference_solution), monkeypatch)
        assert set(solved.values()) == {1.0}, (t.id, solved)


def assert_existence_pays_nothing(tasks: list[Task], tmp_path: Path, monkeypatch) -> None:
    """Every path the checks look at exists (a file, its directories created), empty or with a wrong
    text, beside the starting files: every check scores 0 (the `touch` for every job of run 3)."""
    for t in tasks:
        for filler in ("", "0\n", "wrong\n"):
            root = workspace(t, tmp_path / t.id / str(len(filler)))
            for path in output_paths(t):
                (root / path).parent.mkdir(parents=True, exist_ok=True)
                (root / path).write_text(filler)
            scores = score_in(t, root, monkeypatch)
            assert set(scores.values()) == {0.0}, (t.id, repr(filler), scores)


def validate_local(tasks: list[Task]) -> list[str]:
    """The real verifier path: validate_task in LOCAL sandboxes (untouched fails, reference passes)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = [validate_task(t, SandboxConfig(type="local")) for t in tasks]
    for r in results:
        if r.ok:
            assert r.untouched.status == "ok" and set(r.untouched.checks.values()) == {0.0}, r.task_id
            assert r.reference is not None and r.reference.reward == 1.0, r.task_id
    return [f"{r.task_id}: {r.error}" for r in results if not r.ok]


def tokens(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower()))


# -- the chain family -----------------------------------------------------------------------------

def test_chain_specs_counts_and_the_suite_unchanged():
    assert {s: len(t) for s, t in CHAINS.items()} == {"train": 48, "test": 24, "long": 24, "unseen": 24,
                                                      "paraphrase": 24}
    assert len(load_tasks("builtin:chain")) == len(ALL_CHAINS) == 144
    ids = [t.id for t in ALL_CHAINS]
    assert len(ids) == len(set(ids)) and all(t.family == "chain" and t.category == "chain" for t in ALL_CHAINS)
    assert all(t.split == s for s, tasks in CHAINS.items() for t in tasks)
    suite = load_tasks("builtin:all")  # the one-job suite is what it was: 402 tasks, no chain in it
    assert len(suite) == 402 and not {t.family for t in suite} & {"chain"}
    with pytest.raises(TaskError, match="unknown chain split"):
        load_tasks("builtin:chain:heldout")


def test_chain_generation_is_deterministic():
    again = load_tasks("builtin:chain")
    assert len(again) == len(ALL_CHAINS) and all(a.same_as(b) for a, b in zip(again, ALL_CHAINS))


def test_k_is_what_the_metadata_says_and_max_turns_grows_with_k():
    for t in ALL_CHAINS:
        k = t.metadata["k"]
        assert len(t.metadata["steps"]) == len(checks_of(t)) == len(t.reference_solution) == k, t.id
        assert t.metadata["max_turns"] == 2 + 2 * k
        names = [c["name"] for c in checks_of(t)]
        assert names == [f"step {i + 1}: " + n.split(": ", 1)[1] for i, n in enumerate(names)]
    lengths = {s: {t.metadata["k"] for t in tasks} for s, tasks in CHAINS.items()}
    assert lengths == {"train": {1, 2, 3}, "test": {1, 2, 3}, "long": {4, 5, 6}, "unseen": {1, 2, 3},
                       "paraphrase": {1, 2, 3}}
    turns = {t.metadata["k"]: t.metadata["max_turns"] for t in ALL_CHAINS}
    assert [turns[k] for k in sorted(turns)] == sorted(set(turns.values()))  # strictly increasing in k


def test_later_steps_read_what_earlier_steps_wrote():
    for t in ALL_CHAINS:
        assert t.metadata["seed_file"] in t.reference_solution[0]
        for prev, cmd in zip(t.reference_solution, t.reference_solution[1:]):
            written = prev.split()[-1].rstrip("/")  # `... > out`, `cp src out`, `mkdir -p d && cp src d/`
            assert written in cmd, (t.id, prev, cmd)


def test_unseen_chains_hold_never_trained_steps_and_the_others_do_not():
    for split, tasks in CHAINS.items():
        for t in tasks:
            unseen = set(t.metadata["steps"]) & set(UNSEEN_STEPS)
            assert bool(unseen) == (split == "unseen"), t.id
            assert t.metadata["trained_family"] == (split != "unseen")
    assert set(TRAINED_STEPS) == set(TRAINING_CLAUSES) == set(PARAPHRASE_CLAUSES)
    assert {s for t in CHAINS["train"] for s in t.metadata["steps"]} == set(TRAINED_STEPS)


def test_held_out_chains_share_no_instance_with_train():
    train_names = set(TRAIN.words) | set(TRAIN.stems) | set(TRAIN.dirs)
    train_files = {body for t in CHAINS["train"] for body in t.files.values()}
    train_text = {t.instruction for t in CHAINS["train"]}
    for split in HELD_OUT:
        for t in CHAINS[split]:
            assert not tokens(t.instruction) & train_names, (t.id, tokens(t.instruction) & train_names)
            assert not set(t.files.values()) & train_files, t.id
            assert t.instruction not in train_text
    train_clauses = {c for t in CHAINS["train"] for c in t.metadata["clauses"]}
    assert not train_clauses & {c for t in CHAINS["paraphrase"] for c in t.metadata["clauses"]}


def test_every_chain_reference_passes_and_untouched_scores_zero(tmp_path, monkeypatch):
    assert_references_pass_and_untouched_scores_zero(ALL_CHAINS, tmp_path, monkeypatch)


def test_no_chain_check_pays_for_existence(tmp_path, monkeypatch):
    assert_existence_pays_nothing(ALL_CHAINS, tmp_path, monkeypatch)


def test_chain_sample_validates_with_the_real_verifier_in_a_local_sandbox():
    """One task per (split, k): the verifier in its fresh sandbox, as `tasks validate` runs it."""
    sample = list({(t.split, t.metadata["k"]): t for t in reversed(ALL_CHAINS)}.values())
    assert len(sample) == 15
    assert validate_local(sample) == []


def test_a_lone_absence_check_is_refused():
    with pytest.raises(ValueError, match="pays for nothing alone"):
        step_checker.score({"name": "gone", "kind": "file_absent", "path": "nothing-here.txt"})
