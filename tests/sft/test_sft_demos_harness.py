"""Reference demonstrations through a real harness (harness tier): the reference policy drives
Claude Code in bwrap on a read-then-act task; the rollout passes, every command went through the
harness's own shell tool, and the run is what `harnessrl sft` trains on."""

from __future__ import annotations

import pytest

from harnessrl.config import load_config
from harnessrl.tasks import load_tasks

pytestmark = [pytest.mark.harness, pytest.mark.bwrap]


def test_reference_demos_through_claude_code(tmp_path):
    from harnessrl.harness import check_harnesses
    from harnessrl.sft.data import rejection_trees
    from harnessrl.sft.demos import collect_demos
    from harnessrl.store import RunStore

    try:
        check_harnesses(["claude-code:tiny"], {})
    except Exception as e:  # noqa: BLE001 - not installed here
        pytest.skip(f"claude-code is not installed: {e} (harnessrl harness install claude-code)")
    task = load_tasks("builtin:lookup:test")[0]  # cat the note, then act on what it names
    cfg = load_config(None, ["render.tool_format=bash_examples", "sandbox.type=bwrap", "loop.rollout_timeout_s=180"])
    result = collect_demos(cfg, [task], ["claude-code:tiny"], tmp_path / "demos", progress=False)
    assert (result.rollouts, result.passed) == (1, 1), result
    with RunStore(tmp_path / "demos") as store:
        [record] = store.list_rollouts()
        calls = sorted(store.list_calls([record.rollout_id], include_raw=True), key=lambda c: c.seq)
        data = rejection_trees(store)
    assert record.call_count == len(task.reference_solution) + 1 == len(calls)
    # the second call's request holds the first command's tool result: the note's text came back
    note = task.files[task.metadata["notes"][0]].decode().strip()
    assert note in str(calls[1].request)
    assert data.rollouts == 1 and data.sampled_tokens > 0


def test_cold_start_in_a_run_through_claude_code(tmp_path, monkeypatch):
    """config `cold_start`: demos through the run's harness, SFT on them, the record written last;
    the checkpoint is a plain HF dir the run starts from, and a resumed run reuses it."""
    from harnessrl.harness import check_harnesses
    from harnessrl.report.cold_start import cold_start_lines, read_cold_start
    from harnessrl.sft import cold_start as cs

    try:
        check_harnesses(["claude-code:tiny"], {})
    except Exception as e:  # noqa: BLE001 - not installed here
        pytest.skip(f"claude-code is not installed: {e} (harnessrl harness install claude-code)")
    cfg = load_config(None, ["render.tool_format=bash_examples", "sandbox.type=bwrap", "loop.rollout_timeout_s=180",
                             "harnesses=[{name: 'claude-code:tiny'}]", f"output.run_dir={tmp_path / 'run'}",
                             "cold_start.tasks=[builtin:lookup:train]", "cold_start.limit=2", "cold_start.epochs=1",
                             "cold_start.lr=1e-4"])
    policy = cs.ensure_cold_start(cfg)
    record = read_cold_start(tmp_path / "run")
    assert record is not None and policy == tmp_path / "run" / "cold_start" / "sft" / "policy"
    assert (record.tasks, record.rollouts, record.passed) == (2, 2, 2)
    assert record.nll_after < record.nll_before
    assert (policy / "config.json").is_file() and (policy / "model.safetensors").is_file()
    assert any("2/2 passed" in line for line in cold_start_lines(tmp_path / "run"))

    def refuse(*a, **k):
        raise AssertionError("a finished cold start is reused, not run again")

    monkeypatch.setattr(cs, "run_cold_start", refuse)
    assert cs.ensure_cold_start(cfg) == policy
