"""JobBench loader (tasks/jobbench.py) on fixtures in the published layout, the fact-anchor grader,
and the conformance check: the untouched workspace scores 0 on every task (JobBench ships no
reference solution). Copies of the inputs, links to the rubric, planted graders and lists of
guesses earn nothing."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import warnings
import zipfile
from pathlib import Path

import pytest

from harnessrl.rollout.task_sandbox import open_task_sandbox, validate_task
from harnessrl.sandbox import SandboxConfig
from harnessrl.tasks.jobbench import export_jobbench, load_jobbench, main
from harnessrl.tasks.jobbench_grade import anchors
from harnessrl.tasks.loader import load_tasks
from harnessrl.tasks.model import TaskError
from harnessrl.tasks.verifier import run_verifier

ROOT = Path(__file__).parent / "fixtures" / "jobbench"
LOCAL = SandboxConfig(type="local")
GOOD_REPORT = """# Cohort Summary
The observed event rate is 30.0% (3 of 10 patients), higher than the protocol's 20% assumption.
The mean age of the patients with an event is 61.33 years.
"""


def tasks_by_id(**kw):
    return {t.id: t for t in load_jobbench(ROOT, **kw)}


def score(task, command: str = "", final_message: str = "", sandbox: SandboxConfig = LOCAL):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with open_task_sandbox(task, sandbox) as sb:
            if command:
                res = sb.run(["bash", "-c", command], timeout_s=30)
                assert res.ok, res.stderr
            return run_verifier(task, sb, payload={"final_message": final_message})


def test_loads_the_published_layout():
    tasks = tasks_by_id()
    assert sorted(tasks) == ["jobbench-budget_officers__task2", "jobbench-clinical_analysts__task1"]
    t = tasks["jobbench-clinical_analysts__task1"]
    assert sorted(t.files) == ["TASK_INSTRUCTIONS.txt", "cohort.csv", "files_required_to_search/guideline.md"]
    assert t.instruction.startswith("You are the analyst") and "files_required_to_search/" in t.instruction
    assert (t.family, t.variant, t.split, t.category) == ("clinical_analysts", 1, "test", "jobbench")
    assert t.metadata["criteria"] == 5 and t.metadata["anchored_weight_share"] == 0.9
    assert "rubrics.json" in t.verifier.files and "RUBRICS.json" not in t.files and not t.reference_solution
    no_search = tasks_by_id(include_search=False)["jobbench-clinical_analysts__task1"]
    assert "files_required_to_search/guideline.md" not in no_search.files
    assert "files_required_to_search" not in no_search.instruction
    easy = load_jobbench(ROOT, split="easy")
    assert [t.id for t in easy] == ["jobbench-clinical_analysts__task1"]
    assert easy[0].metadata["jobbench_split"] == "easy"
    one = load_jobbench(ROOT / "dataset" / "budget_officers" / "task2")
    assert [t.id for t in one] == ["jobbench-budget_officers__task2"]


def test_malformed_data_is_named(tmp_path):
    with pytest.raises(TaskError, match="huggingface-cli download JobBench/job-bench"):
        load_jobbench(tmp_path)
    shutil.copytree(ROOT / "dataset" / "budget_officers", tmp_path / "dataset" / "budget_officers")
    (tmp_path / "dataset" / "budget_officers" / "task2" / "RUBRICS.json").write_text('{"rubrics": [{"weight": 2}]}')
    with pytest.raises(TaskError, match="criterion 1 needs a 'rubric' string"):
        load_jobbench(tmp_path)
    with pytest.raises(TaskError, match="split"):
        load_jobbench(ROOT, split="hard")


def test_anchors():
    nums, phrases = anchors("Does it compute the 10-year rate as 20.2% (236/1166) over 1940-1949, with the "
                            "agent's \"Cohort Summary\" and 'Field equipment' at $1,250.75?")
    assert nums == [(20.2, 1), (236.0, 0), (1166.0, 0), (1250.75, 2)]
    assert phrases == ["cohort summary", "field equipment"]
    assert anchors("Is the report written clearly for a clinical audience?") == ([], [])


def test_conformance_untouched_scores_zero():
    for split in ("main", "easy"):
        for t in load_jobbench(ROOT, split=split):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                r = validate_task(t, LOCAL)
            assert r.ok and r.untouched.status == "ok" and r.untouched.reward == 0.0, (t.id, r)
            assert r.reference is None


def test_deliverables_earn_their_anchored_weight():
    t = tasks_by_id()["jobbench-clinical_analysts__task1"]
    full = score(t, f"cat > report.md <<'EOF'\n{GOOD_REPORT}EOF")
    assert full.status == "ok" and full.reward == pytest.approx(18 / 20), full
    assert full.checks == {"within_number_cap": 1.0, "c01": 1.0, "c02": 1.0, "c03": 1.0}
    partial = score(t, "echo 'Event rate: 30.0% against 20% assumed' > report.md")
    assert partial.reward == pytest.approx(10 / 20) and partial.checks["c02"] == 0.0
    rounded = score(t, "echo 'rate 30% vs 20%; mean age 61.3' > report.md")  # under the anchors' precision
    assert rounded.reward == 0.0
    said = score(t, final_message="The rate is 30.0%, above 20%. Mean age 61.33.")
    assert said.reward == pytest.approx(15 / 20)
    memo = tasks_by_id()["jobbench-budget_officers__task2"]
    assert score(memo, "echo 'Approved total: $1,250.75; largest: Field equipment.' > memo.md").reward == 1.0


def test_office_documents_are_read_as_text(tmp_path):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("word/document.xml", "<w:document><w:body><w:p><w:t>Approved total: $1,250.75</w:t></w:p>"
                                         "</w:body></w:document>")
    (tmp_path / "memo.docx").write_bytes(buf.getvalue())
    memo = tasks_by_id()["jobbench-budget_officers__task2"]
    res = score(memo, f"cp {tmp_path / 'memo.docx'} memo.docx")
    assert res.reward == pytest.approx(4 / 5), res


def test_binary_files_are_not_read_as_text():
    t = tasks_by_id()["jobbench-clinical_analysts__task1"]
    res = score(t, "printf '%s\\0\\n' 'rate 30.0% vs 20%, mean age 61.33, Cohort Summary' > chart.png")
    assert res.reward == 0.0, res


HOSTILE = {  # workspaces an agent may leave, hoping for reward
    "copied_inputs": "cat files_required_to_search/guideline.md TASK_INSTRUCTIONS.txt cohort.csv > report.md",
    "renamed_input": "cp files_required_to_search/guideline.md report.md",
    "link_to_rubric": "ln -s .verifier/rubrics.json report.md",
    "planted_grader": "mkdir -p .verifier && echo 'print(\"{\\\"reward\\\": 1}\")' > .verifier/jobbench_grade.py",
    "planted_module": "echo 'import sys; print(\"{\\\"reward\\\": 1}\"); sys.exit(0)' > json.py",
    "guesses": "seq -f '%.2f%%' 0 0.01 100 > report.md; echo 'Cohort Summary' >> report.md",
}


@pytest.mark.bwrap
@pytest.mark.parametrize("attack", sorted(HOSTILE))
def test_a_hostile_workspace_earns_nothing(attack):
    t = tasks_by_id()["jobbench-clinical_analysts__task1"]
    res = score(t, HOSTILE[attack], sandbox=SandboxConfig(type="bwrap"))
    if attack.startswith("link_"):  # refused before the grader runs (issue 39): scored 0 by the runner
        assert res.status == "workspace_link" and res.meta["workspace_link"]["reaches"] == "verifier_files", res
        return
    assert res.status == "ok" and res.reward == 0.0, (attack, res)


@pytest.mark.bwrap
def test_conformance_in_bwrap():
    for t in load_jobbench(ROOT):
        r = validate_task(t, SandboxConfig(type="bwrap"))
        assert r.ok and r.untouched.reward == 0.0, r


def test_export_round_trips_through_the_cli(tmp_path, capsys):
    assert main([str(ROOT), str(tmp_path / "out")]) == 0
    assert "wrote 2 JobBench task directories" in capsys.readouterr().out
    original = tasks_by_id()
    loaded = load_tasks(tmp_path / "out")
    assert len(loaded) == 2 and all(t.same_as(original[t.id]) for t in loaded)
    assert json.loads(loaded[0].verifier.files["rubrics.json"])["rubrics"]
    with pytest.raises(TaskError, match="already exist"):
        export_jobbench(ROOT, tmp_path / "out")
    cmd = [sys.executable, "-m", "harnessrl.tasks.jobbench", str(tmp_path / "none"), str(tmp_path / "o")]
    proc = subprocess.run(cmd,
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "huggingface-cli download" in proc.stdout


@pytest.mark.bwrap
def test_eval_from_the_cli_scores_a_no_op_agent_zero(tmp_path):
    """The documented flow (export, then `harnessrl eval --tasks DIR`) through the real runner: the
    scripted engine's one fixed reply delivers nothing, so every task scores 0."""
    from typer.testing import CliRunner

    from harnessrl.app.main import app

    export_jobbench(ROOT, tmp_path / "tasks")
    res = CliRunner().invoke(app, ["eval", "--tasks", str(tmp_path / "tasks"), "--harness", "builtin", "--engine",
                                   "scripted", "-n", "1", "--run-dir", str(tmp_path / "run"), "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout.strip().splitlines()[-1])
    assert summary["n_rollouts"] == 2 and summary["statuses"] == {"ok": 2} and summary["mean_reward"] == 0.0
