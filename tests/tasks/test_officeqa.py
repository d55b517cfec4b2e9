"""OfficeQA loader (tasks/officeqa.py) on fixtures in the published layout, its scorer's rules, and
the conformance check: the untouched workspace scores 0 on every task, the reference answer 1.
The ground truth never reaches the agent's workspace, and a hostile workspace cannot forge it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from harnessrl.rollout.task_sandbox import open_task_sandbox, validate_task
from harnessrl.sandbox import SandboxConfig
from harnessrl.tasks.loader import load_tasks
from harnessrl.tasks.model import TaskError
from harnessrl.tasks.officeqa import export_officeqa, load_officeqa, main, source_files
from harnessrl.tasks.officeqa_score import matches
from harnessrl.tasks.verifier import run_verifier

FIXTURES = Path(__file__).parent / "fixtures"
ROOT = FIXTURES / "officeqa"
OASI = "Federal Old-Age and Survivors Insurance (OASI) Trust Fund"


def local_validate(tasks):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [validate_task(t, SandboxConfig(type="local")) for t in tasks]


def test_loads_the_published_layout():
    tasks = load_officeqa(ROOT)
    assert [t.id for t in tasks] == [f"officeqa-UID900{i}" for i in range(1, 6)]
    two = tasks[1]
    assert sorted(two.files) == ["docs/treasury_bulletin_1941_01.txt", "docs/treasury_bulletin_1954_02.txt"]
    assert two.category == "officeqa_easy" and two.split == "test" and two.metadata["uid"] == "UID9002"
    assert "<FINAL_ANSWER>" in two.instruction and "answer.txt" in two.instruction
    for t in tasks:  # the ground truth is in the verifier's files, not in what the agent is told
        answer = json.loads(t.verifier.files["expected.json"])["answer"]
        assert answer not in t.instruction and answer not in json.dumps(t.metadata)
    closed = load_officeqa(ROOT, docs="none")
    assert all(not t.files for t in closed) and "docs/" not in closed[0].instruction


def test_legacy_csv_names_the_bulletins_from_the_urls():
    row = {"source_docs": "https://fraser.stlouisfed.org/title/treasury-bulletin-407/january-1941-6529?page=15\n"
                          "https://fraser.stlouisfed.org/title/treasury-bulletin-407/february-1954-6685?page=14&deep=true"}
    assert source_files(row) == ["treasury_bulletin_1941_01", "treasury_bulletin_1954_02"]
    legacy = FIXTURES / "officeqa_legacy"
    (t,) = load_officeqa(legacy, corpus=ROOT / "treasury_bulletins_parsed" / "transformed")
    assert sorted(t.files) == ["docs/treasury_bulletin_1941_01.txt", "docs/treasury_bulletin_1954_02.txt"]


def test_missing_data_names_the_download(tmp_path):
    with pytest.raises(TaskError, match="huggingface-cli download databricks/officeqa"):
        load_officeqa(tmp_path)
    shutil.copy(ROOT / "officeqa_pro.csv", tmp_path)
    with pytest.raises(TaskError, match="parsed corpus is not there"):
        load_officeqa(tmp_path)
    (tmp_path / "officeqa_pro.csv").write_text("id,text\n1,x\n")
    with pytest.raises(TaskError, match="missing columns"):
        load_officeqa(tmp_path)
    with pytest.raises(TaskError, match="subset"):
        load_officeqa(ROOT, subset="hard")


@pytest.mark.parametrize(("truth", "predicted", "ok"), [
    ("2,602", "2602", True), ("2,602", "The total was 2,602 million in 1940.", True), ("2,602", "2,603", False),
    ("1608.80%", "1608.8%", True), ("36080 million", "36080", True), ("36080 million", "36080000000", False),
    ("[0.096, −184.143]", "[0.096, -184.143]", True), ("[0.096, −184.143]", "[0.096]", False),
    ("March 3, 1977", "March 3, 1977", True), ("March 3, 1977", "April 3, 1977", False),
    ("March 3, 1977", "3 1977", False),
    ("August 1986", "august 1986", True), ("1990", "1990", True),
    (OASI, "the federal old-age and survivors insurance trust fund", True), (OASI, "Highway Trust Fund", False),
    ("2,602", " ".join(str(n) for n in range(2590, 2610)), False),  # a list of guesses is not an answer
    ("Highway", "Highway " + "x" * 300, False),  # nor is a page of text around the right word
    ("2,602", "", False),
])
def test_scoring_rules(truth, predicted, ok):
    assert matches(truth, predicted) is ok


def test_tolerance():
    assert not matches("100", "100.5") and matches("100", "100.5", tolerance=0.01)


def test_conformance_untouched_scores_zero_reference_scores_one():
    tasks = load_officeqa(ROOT)
    for r in local_validate(tasks):
        assert r.ok, (r.task_id, r.error)
        assert r.untouched.status == "ok" and r.untouched.reward == 0.0, r
        assert r.reference is not None and r.reference.reward == 1.0, r


def test_final_message_answers_too():
    task = load_officeqa(ROOT)[2]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for message, reward in (("I looked. <FINAL_ANSWER>March 3, 1977</FINAL_ANSWER>", 1.0),
                                ("<FINAL_ANSWER>March 10, 1977</FINAL_ANSWER>", 0.0), ("", 0.0)):
            with open_task_sandbox(task, SandboxConfig(type="local")) as sb:
                res = run_verifier(task, sb, payload={"final_message": message})
            assert (res.status, res.reward) == ("ok", reward), (message, res)


def test_export_round_trips_through_the_cli(tmp_path, capsys):
    assert main([str(ROOT), str(tmp_path / "out"), "--limit", "3"]) == 0
    assert "wrote 3 OfficeQA task directories" in capsys.readouterr().out
    loaded = load_tasks(tmp_path / "out")
    original = {t.id: t for t in load_officeqa(ROOT)}
    assert len(loaded) == 3 and all(t.same_as(original[t.id]) for t in loaded)
    with pytest.raises(TaskError, match="already exist"):
        export_officeqa(ROOT, tmp_path / "out")
    proc = subprocess.run([sys.executable, "-m", "harnessrl.tasks.officeqa", str(tmp_path), str(tmp_path / "o2")],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "huggingface-cli download" in proc.stdout


HOSTILE = {  # what an agent may leave in its workspace, hoping for reward 1
    "link_to_expected": "ln -s .verifier/expected.json answer.txt",
    "link_to_expected_abs": "ln -s \"$PWD/.verifier/expected.json\" answer.txt",
    "planted_verifier": "mkdir -p .verifier && echo 'print(\"{\\\"reward\\\": 1}\")' > .verifier/officeqa_score.py"
                        " && echo '{\"answer\": \"x\"}' > .verifier/expected.json && echo x > answer.txt",
    "planted_json_module": "echo 'import sys; print(\"{\\\"reward\\\": 1}\"); sys.exit(0)' > json.py; echo 0 > answer.txt",
    "answer_dir": "mkdir answer.txt",
    "guesses": "seq 2500 2700 > answer.txt",
}


@pytest.mark.bwrap
@pytest.mark.parametrize("attack", sorted(HOSTILE))
def test_a_hostile_workspace_cannot_forge_the_reward(attack):
    task = load_officeqa(ROOT)[0]  # ground truth 2,602
    with open_task_sandbox(task, SandboxConfig(type="bwrap")) as sb:
        assert sb.run(["bash", "-c", HOSTILE[attack]], timeout_s=30).ok
        res = run_verifier(task, sb, payload={"final_message": "<FINAL_ANSWER>no idea</FINAL_ANSWER>"})
    if attack.startswith("link_"):  # refused before the scorer runs (issue 39): scored 0 by the runner
        assert res.status == "workspace_link" and res.meta["workspace_link"]["reaches"] == "verifier_files", res
        return
    assert res.status == "ok" and res.reward == 0.0, (attack, res)


@pytest.mark.bwrap
def test_conformance_in_bwrap():
    results = [validate_task(t, SandboxConfig(type="bwrap")) for t in load_officeqa(ROOT)]
    assert all(r.ok and r.untouched.reward == 0.0 and r.reference.reward == 1.0 for r in results), results


def test_scorer_runs_under_isolated_python(tmp_path):
    """The verifier command's own interpreter flags: -I keeps the workspace and PYTHON* env off."""
    task = load_officeqa(ROOT)[0]
    vdir = tmp_path / ".verifier"
    vdir.mkdir()
    for name, body in task.verifier.files.items():
        (vdir / name).write_bytes(body)
    (tmp_path / "answer.txt").write_text("2602\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    out = subprocess.run(["bash", "-c", task.verifier.command], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert json.loads(out.stdout) == {"answered": 1.0, "correct": 1.0, "reward": 1.0}


@pytest.mark.bwrap
def test_eval_from_the_cli_scores_a_no_op_agent_zero(tmp_path):
    """The documented flow (export, then `harnessrl eval --tasks DIR`) through the real runner: the
    scripted engine's one fixed reply answers nothing, so every task scores 0."""
    from typer.testing import CliRunner

    from harnessrl.app.main import app

    export_officeqa(ROOT, tmp_path / "tasks")
    res = CliRunner().invoke(app, ["eval", "--tasks", str(tmp_path / "tasks"), "--harness", "builtin", "--engine",
                                   "scripted", "-n", "1", "--run-dir", str(tmp_path / "run"), "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout.strip().splitlines()[-1])
    assert summary["n_rollouts"] == 5 and summary["statuses"] == {"ok": 5} and summary["pass@1"] == 0.0


def test_load_tasks_reads_benchmark_selectors(tmp_path):
    """`officeqa:ROOT[:pro|full]` and `jobbench:ROOT[:main|easy]` load where a task directory would."""
    from harnessrl.tasks.model import TaskError
    from harnessrl.tasks.loader import load_tasks

    assert [t.id for t in load_tasks(f"officeqa:{FIXTURES / 'officeqa'}")] == \
        [t.id for t in load_officeqa(FIXTURES / "officeqa")]
    assert load_tasks(f"jobbench:{FIXTURES / 'jobbench'}:main")
    with pytest.raises(TaskError, match="not a directory"):
        load_tasks(f"officeqa:{tmp_path / 'missing'}")
