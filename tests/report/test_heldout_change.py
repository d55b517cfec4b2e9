"""The run's closing 'what training changed' table (report/heldout.py): paired cells per harness and
set, pooled cells over harnesses and sets, and the rules for when a pooled row is shown."""

from __future__ import annotations

import pytest

from harnessrl.report.heldout import changes_markdown, held_out_changes
from harnessrl.store.records import RolloutRecord

CONFIG = {"harnesses": [{"name": "a"}, {"name": "b"}],
          "tasks": {"eval_sets": ["test", {"name": "builtin:chain:test", "size": 2, "samples": 1}]}}


def _records(rows):
    """rows: (harness, set label, step, task, [rewards]) as the loop's eval stores them."""
    out, i = [], 0
    for harness, label, step, task, rewards in rows:
        tag = label.replace(":", "_")  # how rollout/plan.py labels a set in group ids
        gid = f"eval-{tag + '-' if tag else ''}s{step}-a1-{task}-{harness}"
        for j, reward in enumerate(rewards):
            out.append(RolloutRecord(rollout_id=f"r{i}", task_id=task, harness=harness, group_id=gid, status="ok",
                                     reward=reward, step=step, sample_idx=j, split="eval"))
            i += 1
    return out


def test_per_cell_and_pooled_changes_are_paired_over_tasks():
    rows = [(h, "", s, t, [float(s > 0 and t != "t3"), 0.0]) for h in "ab" for s in (0, 3) for t in ("t1", "t2", "t3")]
    rows += [(h, "builtin:chain:test", s, "c1", [0.0]) for h in "ab" for s in (0, 3)]
    changes = dict(held_out_changes(_records(rows), CONFIG))
    assert set(changes) == {"a · test", "b · test", "a · builtin:chain:test", "b · builtin:chain:test",
                            "all harnesses · test", "all harnesses · builtin:chain:test", "a · all sets",
                            "b · all sets", "all harnesses · all sets"}
    a = changes["a · test"]
    assert (a.before, a.after, a.tasks, a.rollouts_before) == (0.0, pytest.approx(1 / 3), 3, 6)
    pooled = changes["all harnesses · test"]
    assert pooled.tasks == 6 and pooled.change == pytest.approx(1 / 3)  # t1, t2 of each harness: +0.5 each
    everything = changes["all harnesses · all sets"]
    assert everything.tasks == 8 and everything.change == pytest.approx(4 * 0.5 / 8)
    assert everything.ci95[0] > 0  # every task moved up or not at all: the interval excludes 0
    assert "| all harnesses · all sets |" in "\n".join(changes_markdown(list(changes.items())))


def test_one_harness_one_set_has_no_pooled_rows_and_no_eval_after_means_no_table():
    one = {"harnesses": [{"name": "a"}], "tasks": {"eval_sets": ["test"]}}
    rows = [("a", "", s, "t1", [1.0 if s else 0.0]) for s in (0, 2)]
    assert [label for label, _ in held_out_changes(_records(rows), one)] == ["a · test"]
    assert held_out_changes(_records(rows[:1]), one) == []
    assert changes_markdown([]) == []


def test_eval_set_entries_with_their_own_size():
    from harnessrl.config import RunConfig

    t = RunConfig.model_validate(CONFIG | {"harnesses": [{"name": "builtin"}]}).tasks
    assert t.eval_set_names() == ["test", "builtin:chain:test"]
    assert (t.eval_set_size("test", 8), t.eval_set_size("builtin:chain:test", 8)) == (8, 2)
    assert (t.eval_set_samples("test", 4), t.eval_set_samples("builtin:chain:test", 4)) == (4, 1)
    with pytest.raises(ValueError, match="distinct"):
        RunConfig.model_validate({"tasks": {"eval_sets": ["test", {"name": "test", "size": 2}]}})


def test_train_split_lists_join_their_tasks_and_refuse_repeats():
    from harnessrl.config import RunConfig
    from harnessrl.run.errors import TrainError
    from harnessrl.run.task_sets import default_tasks

    cfg = RunConfig.model_validate({"tasks": {"families": ["copy_file", "chain"],
                                              "train_split": ["train", "builtin:chain:train"]}})
    train, _ = default_tasks(cfg)
    assert {t.family for t in train} == {"copy_file", "chain"}
    cfg = RunConfig.model_validate({"tasks": {"train_split": ["train", "builtin:train"]}})
    with pytest.raises(TrainError, match="twice"):
        default_tasks(cfg)
