"""The transfer matrix (`harnessrl transfer`) on fake runs: paired per-task changes, one row per run
labelled by its trained harnesses, one column per eval harness and set; refusals."""

from __future__ import annotations

import pytest

from harnessrl.store import RunStore
from harnessrl.store.records import RolloutRecord


def _run(path, trained, outcomes):
    """outcomes: (harness, set label, step, task, [rewards]) rows as the loop's eval stores them."""
    store = RunStore(path)
    store.set_meta("config", {"harnesses": [{"name": h} for h in trained],
                              "tasks": {"eval_sets": ["test", "unseen"]}})
    i = 0
    for harness, label, step, task, rewards in outcomes:
        gid = f"eval-{label + '-' if label else ''}s{step}-a1-{task}-{harness}"
        for j, reward in enumerate(rewards):
            store.put_rollout(RolloutRecord(rollout_id=f"r{i}", task_id=task, harness=harness, group_id=gid,
                                            status="ok", reward=reward, step=step, sample_idx=j, split="eval"))
            i += 1
    store.put_rollout(RolloutRecord(rollout_id="train0", task_id="t9", harness=trained[0], group_id="s1-a1-t9-x",
                                    status="ok", reward=1.0, step=1))
    store.close()


def test_matrix_from_fake_runs(tmp_path):
    from harnessrl.report.transfer import write_transfer

    _run(tmp_path / "cc", ["claude-code:tiny"], [
        ("claude-code:tiny", "", 0, "a", [0, 0]), ("claude-code:tiny", "", 0, "b", [1, 0]),
        ("claude-code:tiny", "", 3, "a", [1, 1]), ("claude-code:tiny", "", 3, "b", [1, 0]),
        ("codex:small", "", 0, "a", [0, 0]), ("codex:small", "", 3, "a", [0, 1]),
        ("codex:small", "unseen", 0, "u", [1]), ("codex:small", "unseen", 3, "u", [0]),
        ("codex:small", "", 3, "only-after", [1])])  # not evaluated before: left out of the pairing
    _run(tmp_path / "mixed", ["claude-code:tiny", "codex:small"], [
        ("codex:small", "", 0, "a", [1]), ("codex:small", "", 2, "a", [1])])
    rows = write_transfer([tmp_path / "cc", tmp_path / "mixed"], tmp_path / "out")
    cc, mixed = rows
    assert (cc.label, mixed.label) == ("claude-code:tiny", "claude-code:tiny + codex:small")
    _run(tmp_path / "cc-coldstart", ["claude-code:tiny"], [
        ("claude-code:tiny", "", 0, "a", [0]), ("claude-code:tiny", "", 1, "a", [1])])
    again = write_transfer([tmp_path / "cc", tmp_path / "cc-coldstart"], tmp_path / "out2")
    assert [r.label for r in again] == ["claude-code:tiny · cc", "claude-code:tiny · cc-coldstart"]
    c = cc.cells["claude-code:tiny · test"]
    assert (c.before, c.after, c.change, c.tasks) == (0.25, 0.75, 0.5, 2)
    assert c.ci95[0] <= 0.5 <= c.ci95[1] and c.ci95 != (0.5, 0.5)
    assert cc.cells["codex:small · test"].tasks == 1 and cc.cells["codex:small · test"].change == 0.5
    assert cc.cells["codex:small · unseen"].change == -1.0
    assert mixed.after_step == 2 and mixed.cells["codex:small · test"].change == 0.0
    table = (tmp_path / "out" / "transfer.md").read_text()
    assert "| claude-code:tiny | 25 -> 75 (+50.0" in table and "| claude-code:tiny + codex:small | - |" in table
    assert (tmp_path / "out" / "transfer.png").stat().st_size > 1000


def test_a_run_without_before_and_after_evals_is_refused(tmp_path):
    from harnessrl.report.transfer import TransferError, write_transfer

    _run(tmp_path / "noeval", ["codex:small"], [("codex:small", "", 0, "a", [1])])
    with pytest.raises(TransferError, match="no eval before and after .*eval steps: \\[0\\].*harnessrl eval"):
        write_transfer([tmp_path / "noeval"], tmp_path / "out")
    with pytest.raises(TransferError, match="holds no run"):
        write_transfer([tmp_path / "missing"], tmp_path / "out")
