"""The run's task sets from the built-in suite: what is trained on never appears in an eval set,
the family filter applies to train/test/paraphrase but not to the families never trained on."""

from __future__ import annotations

import pytest

from harnessrl.run.task_sets import default_tasks
from harnessrl.config import ConfigError, load_config
from harnessrl.run.errors import TrainError
from harnessrl.tasks.suite import unseen_families


def test_three_eval_sets_filtered_and_disjoint_from_training():
    cfg = load_config(None, ["tasks.families=[write_word, delete_file]", "tasks.eval_sets=[test, paraphrase, unseen]"])
    train, evals = default_tasks(cfg)
    assert list(evals) == ["test", "paraphrase", "unseen"]
    assert {t.family for t in train} == {"write_word", "delete_file"} == {t.family for t in evals["test"]}
    assert {t.family for t in evals["paraphrase"]} == {"write_word", "delete_file"}
    assert {t.split for t in evals["paraphrase"]} == {"paraphrase"}
    assert {t.family for t in evals["unseen"]} == set(unseen_families())
    assert not {t.id for t in train} & {t.id for ts in evals.values() for t in ts}
    # interleaved: the first tasks of a set cover its families in turn
    assert {t.family for t in evals["test"][:2]} == {"write_word", "delete_file"}
    assert len({t.family for t in evals["unseen"][:len(unseen_families())]}) == len(unseen_families())


def test_default_is_the_test_split_and_selectors_work():
    _, evals = default_tasks(load_config(None, []))
    assert list(evals) == ["test"]
    _, evals = default_tasks(load_config(None, ["tasks.eval_sets=[builtin:make_dir]"]))
    assert {t.family for t in evals["builtin:make_dir"]} == {"make_dir"}


def test_bad_eval_sets_are_clear_errors():
    with pytest.raises(TrainError, match="unknown"):
        default_tasks(load_config(None, ["tasks.eval_sets=[heldout]"]))
    with pytest.raises(TrainError, match="share tasks with the train split"):
        default_tasks(load_config(None, ["tasks.eval_sets=[train]"]))
    with pytest.raises(ConfigError, match="distinct"):
        load_config(None, ["tasks.eval_sets=[test, test]"])
