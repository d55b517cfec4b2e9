"""A link into the verifier's own files forges no reward, in any task format (issue 39, item 1; bwrap tier).

The verifier's files are mounted inside the workspace (`.verifier/`, `reward/`, `.harbor-tests/`), so a
link the agent made (`ln -s .verifier/expected.txt sorted.txt`) used to read the expected answer as the
agent's own: reward 1.0 with nothing sorted. Now every link of the verifier's copy is resolved against the
workspace alone first (sandbox/views.py, `vet_links`): one into the verifier's files or out of the
workspace is refused, the rollout scored 0 as `workspace_link`. Each format has the attack, the control
(the same attack with the check off: `run_verifier(check_links=False)`) and an honest rollout that still
scores 1 (links that stay inside the workspace, and a virtualenv's link to /usr/bin/python3, are kept).
"""

from __future__ import annotations

import json
import shlex
import warnings
from dataclasses import replace
from pathlib import Path

import pytest

from harnessrl.engine.scripted import ScriptedEngine
from harnessrl.harness.command import CommandAdapter
from harnessrl.proxy.server import ProxyServer
from harnessrl.rollout.jobs import RolloutJob, RunOptions, run_rollout
from harnessrl.rollout.proxy_link import LocalProxy
from harnessrl.rollout.task_sandbox import open_task_sandbox
from harnessrl.sandbox import SandboxConfig
from harnessrl.store import RunStore
from harnessrl.tasks.clawgym import load_clawgym
from harnessrl.tasks.harbor import load_harbor
from harnessrl.tasks.jobbench import load_jobbench
from harnessrl.tasks.model import Task, Verifier
from harnessrl.tasks.officeqa import load_officeqa
from harnessrl.tasks.verifier import run_verifier
from tests.support.images import build_images, tools_missing

pytestmark = [pytest.mark.bwrap, pytest.mark.timeout(600)]
BWRAP = SandboxConfig(type="bwrap")
FIXTURES = Path(__file__).parent / "fixtures"
NUMBERS, SORTED = "3\n1\n2\n", "1\n2\n3\n"

# native: sorted.txt must equal the verifier's own expected.txt
VERIFY_PY = """import json, pathlib
got = pathlib.Path("sorted.txt").read_text() if pathlib.Path("sorted.txt").exists() else ""
want = pathlib.Path(".verifier/expected.txt").read_text()
print(json.dumps({"sorted": float(got == want)}))
"""
NATIVE = Task(id="sort", instruction="Sort in.txt into sorted.txt.", files={"in.txt": NUMBERS.encode()},
              verifier=Verifier("checks", "python3 .verifier/verify.py",
                                files={"verify.py": VERIFY_PY.encode(), "expected.txt": SORTED.encode()}))
# ClawGym: reward/reward.sh, run in reward/, compares ../sorted.txt with its own expected.txt
REWARD_SH = """#!/bin/bash
if [ -f ../sorted.txt ] && cmp -s ../sorted.txt expected.txt; then echo 1; else echo 0; fi
"""
# Harbor: tests/test.sh compares /app/sorted.txt with /tests/expected.txt
HARBOR_TEST_SH = """#!/bin/bash
if cmp -s /app/sorted.txt /tests/expected.txt; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
"""
HONEST = "sort -n in.txt > sorted.txt"


def clawgym_task(root: Path) -> Task:
    d = root / "task_sort"
    (d / "reward").mkdir(parents=True)
    (d / "input_files").mkdir()
    (d / "input_files" / "in.txt").write_text(NUMBERS)
    (d / "reward" / "reward.sh").write_text(REWARD_SH)
    (d / "reward" / "expected.txt").write_text(SORTED)
    (d / "data_entry.json").write_text(json.dumps({"task_id": "sort", "user_query": "Sort in.txt into sorted.txt.",
                                                   "input_mount_dir": "/workspace"}))
    return load_clawgym(d)


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    if tools_missing():
        pytest.skip(f"image tests need {tools_missing()} (apt-get install umoci skopeo busybox-static)")
    return build_images(tmp_path_factory.mktemp("images"))


def harbor_task(root: Path, layout: Path) -> Task:
    d = root / "sort"
    (d / "tests").mkdir(parents=True)
    (d / "environment").mkdir()
    (d / "task.toml").write_text(f'[environment]\ndocker_image = "{layout}"\n\n[verifier]\ntimeout_sec = 60.0\n')
    (d / "instruction.md").write_text("Sort in.txt into sorted.txt.")
    (d / "tests" / "test.sh").write_text(HARBOR_TEST_SH)
    (d / "tests" / "expected.txt").write_text(SORTED)
    task = load_harbor(d)
    return replace(task, files={"in.txt": NUMBERS.encode()})


def score(task: Task, command: str, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with open_task_sandbox(task, BWRAP) as sb:
            res = sb.run(["sh", "-c", command], timeout_s=60)
            assert res.ok, res.stderr
            return run_verifier(task, sb, **kw)


def outcome(res) -> tuple:
    return res.status, res.reward, (res.meta.get("workspace_link") or {}).get("reaches")


ATTACKS = {  # workspace-relative, and absolute into the workspace, for each format's verifier path
    "native": ["ln -s .verifier/expected.txt sorted.txt", 'ln -s "$PWD/.verifier/expected.txt" sorted.txt',
               "mkdir d && ln -s ../.verifier d/v && ln -s d/v/expected.txt sorted.txt"],
    "clawgym": ["ln -s reward/expected.txt sorted.txt", 'ln -s "$PWD/reward/expected.txt" sorted.txt'],
    "harbor": ["ln -s .harbor-tests/expected.txt sorted.txt", 'ln -s "$PWD/.harbor-tests/expected.txt" sorted.txt'],
}
OUT_OF_WORKSPACE = {  # links out: Harbor's /tests, the verifier's cwd, its /tmp
    "native": "ln -s /proc/self/cwd/.verifier/expected.txt sorted.txt",
    "clawgym": "ln -s /proc/self/cwd/expected.txt sorted.txt",
    "harbor": "ln -s /tests/expected.txt sorted.txt",
}


@pytest.fixture(scope="module")
def formats(tmp_path_factory, images) -> dict[str, Task]:
    root = tmp_path_factory.mktemp("formats")
    return {"native": NATIVE, "clawgym": clawgym_task(root), "harbor": harbor_task(root, images.layout)}


@pytest.mark.parametrize("fmt", ["native", "clawgym", "harbor"])
def test_a_link_into_the_verifiers_files_is_refused_in_every_format(fmt, formats):
    task = formats[fmt]
    # the control: with the check off, the relative link reads the expected answer as the agent's
    assert outcome(score(task, ATTACKS[fmt][0], check_links=False)) == ("ok", 1.0, None)
    for attack in ATTACKS[fmt]:
        assert outcome(score(task, attack)) == ("workspace_link", None, "verifier_files"), attack
    res = score(task, OUT_OF_WORKSPACE[fmt])
    assert outcome(res) == ("workspace_link", None, "outside"), res
    assert "sorted.txt" in res.error


@pytest.mark.parametrize("fmt", ["native", "clawgym", "harbor"])
def test_honest_workspaces_with_links_still_score(fmt, formats):
    task = formats[fmt]
    assert outcome(score(task, HONEST)) == ("ok", 1.0, None)
    inside = "mkdir out && sort -n in.txt > out/s.txt && ln -s out/s.txt sorted.txt && ln -s /usr/bin/env env-link"
    assert outcome(score(task, inside)) == ("ok", 1.0, None)
    assert outcome(score(task, "ln -s nothere dangling && ln -s in.txt sorted.txt")) == ("ok", 0.0, None)


def test_officeqa_and_jobbench_refuse_the_link_their_scorers_already_ignore():
    """Their scorers open the answer with O_NOFOLLOW, so the link earned 0 before too; it is now refused
    before they run. The control shows the link does reach the expected answer with the check off."""
    officeqa = load_officeqa(FIXTURES / "officeqa")[0]
    jobbench = {t.id: t for t in load_jobbench(FIXTURES / "jobbench")}["jobbench-clinical_analysts__task1"]
    for task, link, secret in ((officeqa, "ln -s .verifier/expected.json answer.txt", "expected.json"),
                               (jobbench, "ln -s .verifier/rubrics.json report.md", "rubrics.json")):
        name = link.split()[-1]
        probe = replace(task, verifier=replace(task.verifier, command=(
            f"cmp -s {name} .verifier/{secret} && echo '{{\"reaches\": 1}}' || echo '{{\"reaches\": 0}}'")))
        assert outcome(score(probe, link, check_links=False)) == ("ok", 1.0, None)  # control: it reaches it
        assert outcome(score(task, link)) == ("workspace_link", None, "verifier_files")
        solution = task.reference_solution[0] if task.reference_solution else ""
        if solution:
            assert outcome(score(task, solution)) == ("ok", 1.0, None)


# --- through the runner: the status and its record ---------------------------------------------------

CALL = """import json, os, urllib.request
body = json.dumps({"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}).encode()
req = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", body,
                             {"Content-Type": "application/json", "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
urllib.request.urlopen(req, timeout=60).read()
"""


@pytest.fixture(scope="module")
def renderer():
    from harnessrl.engine.model import smollm2_tokenizer_dir
    from harnessrl.render.renderer import Renderer

    return Renderer.from_pretrained(smollm2_tokenizer_dir())


@pytest.fixture
def runner(renderer, tmp_path, tmp_path_factory):
    store = RunStore(tmp_path / "run")
    engine = ScriptedEngine(lambda ids: renderer.encode("ok") + [renderer.eot_id], eos_ids=renderer.stop_ids)
    server = ProxyServer(engine, store, renderer).start()
    scripts = tmp_path_factory.mktemp("call")
    (scripts / "call.py").write_text(CALL)
    for p in (scripts, scripts / "call.py"):
        p.chmod(0o755)  # the sandbox's unprivileged uid reads it

    def rollout(script: str, idx: int = 0, task: Task = NATIVE, timeout_s: float = 60.0):
        body = f"python3 {scripts}/call.py; {script}"
        harness = CommandAdapter(f"sh -c {shlex.quote(body)}", ro=(scripts,))
        job = RolloutJob(task, "command:attack", "g-links", idx)
        opts = RunOptions(sandbox_cfg=BWRAP, max_turns=3, harness_timeout_s=timeout_s)
        return run_rollout(job, harness, LocalProxy(server), store, opts)

    yield rollout
    server.stop()
    store.close()


def test_the_runner_scores_a_forged_link_zero_and_names_it(runner):
    rec = runner("ln -s .verifier/expected.txt sorted.txt")
    assert (rec.status, rec.reward) == ("workspace_link", 0.0), rec.error
    assert rec.meta["workspace_link"]["path"] == "sorted.txt" and rec.meta["workspace_link"]["reaches"] == "verifier_files"
    # however the harness ends: a crash after planting the link is still named and scored 0
    rec = runner("ln -s .verifier/expected.txt sorted.txt; exit 3", idx=1)
    assert (rec.status, rec.reward, rec.meta.get("harness_status")) == ("workspace_link", 0.0, "harness_error"), (rec.status, rec.error, rec.meta)
    rec = runner(HONEST, idx=2)
    assert (rec.status, rec.reward) == ("ok", 1.0), rec.error
