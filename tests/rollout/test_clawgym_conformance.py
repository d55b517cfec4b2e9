"""ClawGym conformance (real bwrap): tasks written in the exact ClawGym layout load, run through the
runner (builtin agent, scripted policy, real proxy), and score exactly as running their reward.sh by
hand in a sandbox does. A reward.sh that crashes or prints garbage is a verifier_error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harnessrl.proxy.server import ProxyServer
from harnessrl.rollout.jobs import run_groups
from harnessrl.sandbox import SandboxConfig, make_sandbox
from harnessrl.tasks import load_tasks

from .solver import plan_engine

pytestmark = pytest.mark.bwrap
WS = "/root/.openclaw/workspace"
BWRAP = SandboxConfig(type="bwrap")

# reward.sh as the published tasks write it: hardcoded workspace path, averages check.py's JSON.
REWARD_SH = f"""#!/bin/bash
RESULT=$(python3 {WS}/reward/check.py) || exit 1
echo "$RESULT"
python3 -c 'import json, sys; d = json.loads(sys.argv[1]); print(sum(d.values()) / len(d))' "$RESULT"
"""

CHECKS = {
    "ci_report": f"""import json, os
p = "{WS}/reports/ci.md"
text = open(p).read() if os.path.exists(p) else ""
print(json.dumps({{"report_exists": float(os.path.exists(p)), "mentions_passed": float("passed: 3" in text),
                  "mentions_failed": float("failed: 1" in text)}}))
""",
    "yaml_config": f"""import json, os, yaml
p = "{WS}/config.yaml"
data = yaml.safe_load(open(p)) if os.path.exists(p) else {{}}
print(json.dumps({{"has_port": float((data or {{}}).get("port") == 8080), "file": float(os.path.exists(p))}}))
""",
    "final_answer": """import json, os
payload = json.load(open(os.environ["OPENCLAW_REWARD_PAYLOAD"]))
print(json.dumps({"answered": float(payload["final_message"].strip() == "Done."),
                  "notes": float(os.path.exists("/root/.openclaw/workspace/notes.txt"))}))
""",
    "crashing_checker": "raise SystemExit('checker bug')\n",
    "no_peek": f"""import json, os
p = "{WS}/seen.txt"
text = open(p).read() if os.path.exists(p) else "check.py"
print(json.dumps({{"listed": float(os.path.exists(p)), "checker_unseen": float("check.py" not in text)}}))
""",
}

TASKS = {  # task id -> (user query, input files, the scripted agent's command or None)
    "ci_report": ("Summarise input/ci/*.json into reports/ci.md with the passed and failed counts.",
                  {"input/ci/a.json": '{"passed": 2, "failed": 1}', "input/ci/b.json": '{"passed": 1, "failed": 0}'},
                  "mkdir -p reports && echo 'passed: 3' > reports/ci.md"),  # partial: 2 of 3 checks
    "yaml_config": ("Write config.yaml setting port to 8080.", {"README.md": "configure me\n"},
                    "printf 'port: 8080\\n' > config.yaml"),
    "final_answer": ("Read notes.txt and tell me when you are finished.", {"notes.txt": "hi\n"}, "cat notes.txt"),
    "crashing_checker": ("Do nothing at all.", {"a.txt": "a\n"}, None),
    # the agent looks for the checker: reward/ must not exist while it runs
    "no_peek": ("List every file you can see into seen.txt.", {"b.txt": "b\n"},
                "ls -aR > seen.txt; ls reward >> seen.txt 2>&1; ls -R /root/.openclaw >> seen.txt 2>&1"),
}


def write_task(root: Path, task_id: str) -> Path:
    query, files, _ = TASKS[task_id]
    d = root / task_id
    for rel, content in files.items():
        (d / "input_files" / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / "input_files" / rel).write_text(content)
    (d / "reward").mkdir(parents=True)
    (d / "reward" / "reward.sh").write_text(REWARD_SH if task_id != "crashing_checker" else
                                            f"#!/bin/bash\npython {WS}/reward/check.py\necho 1.0\nexit 1\n")
    (d / "reward" / "check.py").write_text(CHECKS[task_id])
    (d / "data_entry.json").write_text(json.dumps({"task_id": task_id, "user_query": query, "input_mount_dir": WS,
                                                   "metadata": {"category": "conformance", "grading_type": "automated"}}))
    return d


def reward_by_hand(task_dir: Path, command: str | None, final_message: str) -> float | None:
    """What the reference setup does: workspace at WS, the agent acts, reward/ copied in, `bash reward.sh`."""
    with make_sandbox(BWRAP.model_copy(update={"workspace_mount": WS}), workspace_src=task_dir / "input_files") as sb:
        if command:
            assert sb.run(["bash", "-c", command], timeout_s=60).ok
        sb.copy_in(task_dir / "reward", "reward")
        payload = task_dir.parent / f"{task_dir.name}.payload.json"
        payload.write_text(json.dumps({"final_message": final_message, "metadata": {}, "transcript": []}))
        sb.copy_in(payload, "/tmp/payload.json")
        res = sb.run(["bash", "reward.sh"], cwd="reward", env={"OPENCLAW_REWARD_PAYLOAD": "/tmp/payload.json"},
                     timeout_s=120)
    if not res.ok:
        return None
    try:
        return float(res.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return None


@pytest.fixture
def claw_tasks(tmp_path):
    for task_id in TASKS:
        write_task(tmp_path / "tasks", task_id)
    return tmp_path / "tasks"


def test_clawgym_tasks_score_as_by_hand(claw_tasks, renderer, store):
    tasks = load_tasks(claw_tasks)
    assert sorted(t.id for t in tasks) == sorted(TASKS)
    engine = plan_engine(renderer, {q: cmd for q, _, cmd in TASKS.values()})
    server = ProxyServer(engine, store, renderer).start()
    try:
        records = run_groups(tasks, ["builtin"], 1, proxy=server, store=store, sandbox_cfg=BWRAP, max_turns=3,
                             concurrency=2, progress=False)
    finally:
        server.stop()
    got = {r.task_id: r for r in records}
    for task_id, (_, _, command) in TASKS.items():
        final = "Done." if command else "I give up."
        expected = reward_by_hand(claw_tasks / task_id, command, final)
        rec = got[task_id]
        if expected is None:  # a verifier failing on the policy's workspace is scored 0, never left out
            assert (rec.status, rec.reward) == ("verifier_error", 0.0), rec
        else:
            assert rec.status == "ok", rec
            assert rec.reward == pytest.approx(expected), (task_id, rec.reward, expected)
    assert got["ci_report"].reward == pytest.approx(2 / 3)
    assert got["ci_report"].checks == {"report_exists": 1.0, "mentions_passed": 1.0, "mentions_failed": 0.0}
    assert got["yaml_config"].reward == 1.0 and got["final_answer"].reward == 1.0
    assert got["no_peek"].checks == {"listed": 1.0, "checker_unseen": 1.0}
