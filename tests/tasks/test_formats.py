"""Task loading: ClawGym and native directories give the same Task; malformed dirs give TaskError."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harnessrl.tasks import TaskError, load_task_dir, load_tasks
from harnessrl.tasks.clawgym import load_clawgym, write_clawgym
from harnessrl.tasks.native import load_native, write_native
from harnessrl.tasks.suite import build_suite

REWARD_SH = "#!/bin/bash\npython3 check.py | python3 -c 'import json,sys; d=json.load(sys.stdin); print(sum(d.values())/len(d))'\n"
CHECK_PY = "import json, os\nprint(json.dumps({'done': float(os.path.exists('/root/.openclaw/workspace/out.md'))}))\n"


def make_clawgym(root: Path) -> Path:
    d = root / "task_0001"
    (d / "input_files" / "input").mkdir(parents=True)
    (d / "input_files" / "input" / "a.json").write_text('{"x": 1}\n')
    (d / "reward").mkdir()
    (d / "reward" / "reward.sh").write_text(REWARD_SH)
    (d / "reward" / "check.py").write_text(CHECK_PY)
    (d / "data_entry.json").write_text(json.dumps({
        "task_id": "task_0001", "user_query": "Summarise input/a.json into out.md",
        "input_mount_dir": "/root/.openclaw/workspace",
        "metadata": {"category": "reports", "grading_type": "automated"}}))
    return d


def make_native_equivalent(root: Path) -> Path:
    d = root / "native_0001"
    (d / "workspace" / "input").mkdir(parents=True)
    (d / "workspace" / "input" / "a.json").write_text('{"x": 1}\n')
    (d / "verifier").mkdir()
    (d / "verifier" / "reward.sh").write_text(REWARD_SH)
    (d / "verifier" / "check.py").write_text(CHECK_PY)
    (d / "task.toml").write_text("""
id = "task_0001"
instruction = "Summarise input/a.json into out.md"
category = "reports"
pass_threshold = 0.5
pass_rule = ">"
input_mount_dir = "/root/.openclaw/workspace"

[verifier]
kind = "reward_line"
command = "bash reward.sh"
dest = "reward"
workdir = "reward"
timeout_s = 120

[metadata]
category = "reports"
grading_type = "automated"
""")
    return d


def test_clawgym_and_native_give_the_same_task(tmp_path):
    a = load_task_dir(make_clawgym(tmp_path))
    b = load_task_dir(make_native_equivalent(tmp_path))
    assert a.same_as(b)
    assert a.files == {"input/a.json": b'{"x": 1}\n'}
    assert a.verifier.kind == "reward_line" and a.verifier.timeout_s == 120
    assert a.passed(0.51) and not a.passed(0.5)  # ClawGym counts reward > 0.5


def test_clawgym_defaults(tmp_path):
    d = make_clawgym(tmp_path)
    entry = json.loads((d / "data_entry.json").read_text())
    del entry["input_mount_dir"]
    (d / "data_entry.json").write_text(json.dumps(entry))
    task = load_clawgym(d)
    assert task.input_mount_dir == "/root/.openclaw/workspace"
    assert task.category == "reports" and task.id == "task_0001"


def test_round_trips(tmp_path):
    builtin = build_suite()[5]
    assert load_native(write_native(builtin, tmp_path / "n")).same_as(builtin)
    claw = load_clawgym(make_clawgym(tmp_path))
    assert load_clawgym(write_clawgym(claw, tmp_path / "c")).same_as(claw)
    assert load_native(write_native(claw, tmp_path / "cn")).same_as(claw)


def test_directory_of_tasks_mixes_formats(tmp_path):
    make_clawgym(tmp_path)
    write_native(build_suite()[0], tmp_path / "b")
    tasks = load_tasks(tmp_path)
    assert sorted(t.id for t in tasks) == sorted(["task_0001", build_suite()[0].id])


@pytest.mark.parametrize("breakage, message", [
    (lambda d: (d / "reward" / "reward.sh").unlink(), "reward.sh is required"),
    (lambda d: (d / "data_entry.json").write_text("{not json"), "cannot read a JSON object"),
    (lambda d: (d / "data_entry.json").write_text('{"task_id": "x"}'), "user_query"),
])
def test_malformed_clawgym(tmp_path, breakage, message):
    d = make_clawgym(tmp_path)
    breakage(d)
    with pytest.raises(TaskError, match=message):
        load_task_dir(d)


def test_malformed_native(tmp_path):
    d = make_native_equivalent(tmp_path)
    (d / "task.toml").write_text('id = "x"\ninstruction = "y"\nbogus = 1\n')
    with pytest.raises(TaskError, match="unknown keys"):
        load_native(d)
    (d / "task.toml").write_text('id = "x"\ninstruction = "y"\n')
    with pytest.raises(TaskError, match="verify.py or verify.sh"):
        load_native(d)
    (d / "verify.sh").write_text("echo '{\"a\": 1}'\n")
    assert load_native(d).verifier.command == "bash .verifier/verify.sh"


def test_bad_sources(tmp_path):
    with pytest.raises(TaskError, match="does not exist"):
        load_tasks(tmp_path / "missing")
    with pytest.raises(TaskError, match="no task directories"):
        load_tasks(tmp_path)
    with pytest.raises(TaskError, match="unknown category"):
        load_tasks("builtin:nope")
    make_clawgym(tmp_path)
    make_clawgym(tmp_path / "again")
    (tmp_path / "again" / "task_0001").rename(tmp_path / "task_0002")
    with pytest.raises(TaskError, match="duplicate task ids"):
        load_tasks(tmp_path)
