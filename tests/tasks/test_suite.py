"""The built-in suite: splits and families, deterministic generation, variety, the separation of
train / test / paraphrase / unseen (pools, wordings, answers), and every verifier fails the
untouched workspace and passes the reference solution."""

from __future__ import annotations

import random
import re
import string
import subprocess
import sys
import warnings
from collections import Counter, defaultdict

import pytest

from harnessrl.harness.builtin_agent import TEXT_EXAMPLES
from harnessrl.sandbox.base import SandboxConfig
from harnessrl.tasks import load_tasks
from harnessrl.tasks.model import TaskError
from harnessrl.tasks.suite import SPLITS, build_suite, categories, trained_families, unseen_families
from harnessrl.tasks.suite.families import FAMILIES
from harnessrl.tasks.suite.paraphrase import PARAPHRASE_POOLS, PARAPHRASES
from harnessrl.tasks.suite.pools import TEST, TRAIN
from harnessrl.tasks.suite.templates import TRAINING, UNSEEN
from harnessrl.rollout.task_sandbox import open_task_sandbox, run_commands, validate_task
from harnessrl.tasks.verifier import run_verifier

SUITE = build_suite()
BY_SPLIT = {s: [t for t in SUITE if t.split == s] for s in SPLITS}
POOLS = {"train": TRAIN, "test": TEST, "paraphrase": PARAPHRASE_POOLS}


def _tokens(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower()))


def test_splits_and_families():
    assert set(BY_SPLIT) == {"train", "test", "paraphrase", "unseen"}
    assert len(trained_families()) >= 3 and len(unseen_families()) >= 3
    assert {"file_ops", "text_edits", "data_extraction", "shell"} <= set(categories())
    for split in ("train", "test", "paraphrase"):
        assert {t.family for t in BY_SPLIT[split]} == set(trained_families())
    assert {t.family for t in BY_SPLIT["unseen"]} == set(unseen_families())
    assert not set(trained_families()) & set(unseen_families())
    ids = [t.id for t in SUITE]
    assert len(ids) == len(set(ids))
    assert all(t.reference_solution and t.pass_threshold == 1.0 for t in SUITE)


def test_generation_is_deterministic():
    assert build_suite() == SUITE


def test_selectors():
    for split in SPLITS:
        tasks = load_tasks(f"builtin:{split}")
        assert tasks and {t.split for t in tasks} == {split}
    assert sum(len(load_tasks(f"builtin:{s}")) for s in SPLITS) == len(load_tasks("builtin:all")) == len(SUITE)
    assert {t.category for t in load_tasks("builtin:file_ops:paraphrase")} == {"file_ops"}
    assert {(t.family, t.split) for t in load_tasks("builtin:csv_count_rows:test")} == {("csv_count_rows", "test")}
    assert {t.split for t in load_tasks("builtin:make_dir")} == {"unseen"}
    with pytest.raises(TaskError, match="never trained on"):
        load_tasks("builtin:make_dir:train")
    with pytest.raises(TaskError, match="unknown split"):
        load_tasks("builtin:write_word:heldout")
    with pytest.raises(TaskError, match="already a split"):
        load_tasks("builtin:test:train")


def test_pools_are_disjoint_and_avoid_the_agents_examples():
    pools = list(POOLS.values())
    for kind in ("words", "stems", "dirs"):
        for p in pools:
            values = getattr(p, kind)
            assert len(values) == len(set(values)), (p.name, kind)
        for i, a in enumerate(pools):
            for b in pools[i + 1:]:
                assert not set(getattr(a, kind)) & set(getattr(b, kind)), (a.name, b.name, kind)
    all_words = {w for p in pools for kind in ("words", "stems", "dirs") for w in getattr(p, kind)}
    example_words = {w for task, cmd in TEXT_EXAMPLES for w in _tokens(task + " " + cmd)}
    assert not all_words & example_words
    assert len(TRAIN.words) >= 100 and len(TEST.words) >= 40 and len(PARAPHRASE_POOLS.words) >= 40


def _fields(template: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(template) if f}


def _skeleton(template: str) -> str:
    return " ".join(re.sub(r"\{\w+\}", "{}", template.lower()).replace(".", " ").split())


def test_templates_fill_every_slot_and_paraphrases_are_new_wordings():
    for family in FAMILIES:
        slots = set(family.make(random.Random(0), TEST).slots)
        table = TRAINING if family.trained else UNSEEN
        wordings = list(table[family.name]) + list(PARAPHRASES.get(family.name, ()))
        for template in wordings:  # every template names every slot: nothing the job needs is left out
            assert _fields(template) == slots, (family.name, template)
    assert set(PARAPHRASES) == set(TRAINING) == set(trained_families())
    assert set(UNSEEN) == set(unseen_families())
    for name in trained_families():
        assert len(TRAINING[name]) >= 5 and len(PARAPHRASES[name]) >= 4
        train_skeletons = {_skeleton(t) for t in TRAINING[name]}
        assert not train_skeletons & {_skeleton(t) for t in PARAPHRASES[name]}, name
    # paraphrases are not near-copies: each shares at most half of its words with every training template
    for name in trained_families():
        for para in PARAPHRASES[name]:
            for train in TRAINING[name]:
                a, b = _tokens(re.sub(r"\{\w+\}", "", para)), _tokens(re.sub(r"\{\w+\}", "", train))
                assert len(a & b) <= 0.6 * len(a), (para, train)


def test_train_split_varies_words_names_values_and_wordings():
    by_family = defaultdict(list)
    for t in BY_SPLIT["train"]:
        by_family[t.family].append(t)
    for family, tasks in by_family.items():
        assert len({t.instruction for t in tasks}) == len(tasks), family
        assert len({t.metadata["template"] for t in tasks}) >= 5, family
        answers = Counter(str(t.metadata["answer"]) for t in tasks)
        assert len(answers) >= len(tasks) // 4, (family, answers)  # no answer dominates
        assert answers.most_common(1)[0][1] <= len(tasks) // 4, (family, answers)


def test_memorised_training_answers_cannot_pass_held_out_tasks():
    train_tokens = set().union(*(_tokens(t.instruction) for t in BY_SPLIT["train"]))
    train_names = set(TRAIN.words) | set(TRAIN.stems) | set(TRAIN.dirs)
    train_answers = {str(t.metadata["answer"]) for t in BY_SPLIT["train"]}
    for split in ("test", "paraphrase"):
        for t in BY_SPLIT[split]:
            assert not _tokens(t.instruction) & train_names, (t.id, _tokens(t.instruction) & train_names)
            if not isinstance(t.metadata["answer"], int):  # numbers (row counts) repeat by nature
                assert str(t.metadata["answer"]) not in train_answers, t.id
    for t in BY_SPLIT["paraphrase"]:  # paraphrase wording is not training wording
        assert t.metadata["template"] not in {x.metadata["template"] for x in BY_SPLIT["train"]}
    assert train_tokens  # sanity: the training wording has content


def test_replaying_training_solutions_fails_paraphrase_tasks():
    """Run the reference solutions of 3 training tasks of the same family in each family's first
    paraphrase task: a policy that memorised training answers passes none of them."""
    train = defaultdict(list)
    for t in BY_SPLIT["train"]:
        train[t.family].append(t)
    cfg = SandboxConfig(type="local")
    for para in (t for t in BY_SPLIT["paraphrase"] if t.variant == 0):
        for memorised in train[para.family][:3]:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with open_task_sandbox(para, cfg) as sb:
                    run_commands(sb, memorised.reference_solution)
                    result = run_verifier(para, sb)
            assert result.status == "ok" and not para.passed(result.reward), (para.id, memorised.id)


def test_tasks_package_imports_without_heavy_deps():
    code = ("import sys, harnessrl.tasks, harnessrl.tasks.suite, harnessrl.app.tasks, harnessrl.rollout.pass_at_k;"
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
    """Fast tier: the first variant of every family in every split (the bwrap test covers all)."""
    assert _validate_all([t for t in SUITE if t.variant == 0], "local") == []


@pytest.mark.bwrap
@pytest.mark.parametrize("family", [f.name for f in FAMILIES])
def test_every_reference_passes_and_untouched_fails_bwrap(family):
    """The first 4 variants of a family in each of its splits (the other variants come from the
    same generator; the fast tier validates variant 0 of everything locally)."""
    tasks = [t for t in SUITE if t.family == family and t.variant < 4]
    assert _validate_all(tasks, "bwrap") == []
