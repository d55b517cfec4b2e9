"""The built-in suite: size, categories, deterministic generation, disjoint splits, and every
verifier fails the untouched workspace and passes the reference solution."""

from __future__ import annotations

import subprocess
import sys
import warnings

import pytest

from harnessrl.sandbox.base import SandboxConfig
from harnessrl.tasks import load_tasks
from harnessrl.tasks.suite import SPLITS, build_suite, categories
from harnessrl.tasks.suite.base import DIRS, STEMS, WORDS
from harnessrl.tasks.validate import validate_task

SUITE = build_suite()


def test_size_categories_and_splits():
    assert len(SUITE) >= 80
    assert len(categories()) >= 4
    assert {"file_ops", "text_edits", "data_extraction", "shell"} <= set(categories())
    for cat in categories():
        for split in SPLITS:
            assert load_tasks(f"builtin:{cat}:{split}"), (cat, split)
    ids = [t.id for t in SUITE]
    assert len(ids) == len(set(ids))
    assert all(t.reference_solution and t.pass_threshold == 1.0 for t in SUITE)


def test_generation_is_deterministic():
    assert build_suite() == SUITE


def test_selectors():
    train, test = load_tasks("builtin:train"), load_tasks("builtin:test")
    assert {t.split for t in train} == {"train"} and {t.split for t in test} == {"test"}
    assert len(train) + len(test) == len(load_tasks("builtin:all")) == len(SUITE)
    assert {t.category for t in load_tasks("builtin:shell")} == {"shell"}
    assert {t.family for t in load_tasks("builtin:csv_sum:test")} == {"csv_sum"}


def test_held_out_split_uses_new_surface_forms():
    for pool in (WORDS, STEMS, DIRS):
        assert not set(pool["train"]) & set(pool["test"])
    train = load_tasks("builtin:train")
    test = load_tasks("builtin:test")
    assert not {t.instruction for t in train} & {t.instruction for t in test}
    train_words = set(WORDS["train"]) | set(STEMS["train"])
    for t in test:  # no train word or file stem appears in a held-out instruction
        words = set(t.instruction.replace(".", " ").replace("/", " ").split())
        assert not words & train_words, (t.id, words & train_words)


def test_tasks_package_imports_without_heavy_deps():
    code = ("import sys, harnessrl.tasks, harnessrl.tasks.suite, harnessrl.tasks.cli, harnessrl.rollout.metrics;"
            "heavy = [m for m in ('torch', 'transformers', 'vllm') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _validate_all(tasks, sandbox_type: str) -> list[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = [validate_task(t, SandboxConfig(type=sandbox_type)) for t in tasks]
    for r in results:  # the untouched workspace ran, and did not pass
        assert r.untouched.status == "ok" and r.untouched.reward < 1.0
        assert r.reference is not None and r.reference.reward == 1.0
    return [f"{r.task_id}: {r.error}" for r in results if not r.ok]


def test_reference_passes_and_untouched_fails_local():
    """Fast tier: one variant of every family (the bwrap test below covers all tasks)."""
    assert _validate_all([t for t in SUITE if t.variant == 0 and t.split == "test"], "local") == []


@pytest.mark.bwrap
def test_every_reference_passes_and_untouched_fails_bwrap():
    assert _validate_all(SUITE, "bwrap") == []
