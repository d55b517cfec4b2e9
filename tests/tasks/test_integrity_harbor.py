"""Harbor's reward channel belongs to test.sh, not to the agent's code that test.sh runs (issue 39, item 2;
bwrap tier, on a busybox + bash image built here).

In a Terminal-Bench-style task test.sh runs the agent's program (here `sum.sh`), as the same user that
writes /logs/verifier/reward.txt. A wrong `sum.sh` used to write the reward itself and lock it (or make
reward.txt a directory, or write reward.json and chmod 555 the directory, or kill test.sh, or leave a
process that rewrites the reward after test.sh): reward 1.0. Under the reward guard (tasks/harbor.py,
GUARD_SH) each is a forgery scored 0 with a status naming it (`reward_forged`, meta.reward_forged: locked,
not_regular, present), or ends outside the guard (`verifier_error`, 0), or is stopped before it writes
(0). Each vector's control is the same attack against the unguarded verifier (`load_harbor(...,
reward_guard=False)`), which pays 1.0; honest test.sh files of several styles still score 1 and 0.
"""

from __future__ import annotations

import shlex
import warnings
from pathlib import Path

import pytest

from harnessrl.engine.scripted import ScriptedEngine
from harnessrl.harness.command import CommandAdapter
from harnessrl.proxy.server import ProxyServer
from harnessrl.rollout.jobs import RolloutJob, RunOptions, run_rollout
from harnessrl.rollout.proxy_link import LocalProxy
from harnessrl.rollout.task_sandbox import open_task_sandbox, validate_task
from harnessrl.sandbox import SandboxConfig
from harnessrl.store import RunStore
from harnessrl.tasks.harbor import load_harbor
from harnessrl.tasks.model import Task
from harnessrl.tasks.verifier import run_verifier
from tests.support.images import build_images, tools_missing

pytestmark = [pytest.mark.bwrap, pytest.mark.timeout(600)]
BWRAP = SandboxConfig(type="bwrap")

# Terminal-Bench's template: run the agent's program, then write the reward from the result
TB_TEST_SH = """#!/bin/bash
out=$(bash /app/sum.sh 2 3 2>/dev/null)
test "$out" = 5
if [ $? -eq 0 ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""
# other honest styles: a variable path written in a function, its own EXIT trap, set -euo pipefail,
# a background helper of its own; reward.json from a heredoc; a pipeline into tee
STYLES = {
    "function_and_traps": """#!/bin/bash
set -euo pipefail
OUT=/logs/verifier/reward.txt
cleanup() { rm -f /tmp/scratch; }
trap cleanup EXIT
finish() { echo "$1" > "$OUT"; }
sleep 30 &
if [ "$(bash /app/sum.sh 2 3 2>/dev/null || true)" = 5 ]; then finish 1; else finish 0; fi
""",
    "json_heredoc": """#!/bin/bash
r=0
[ "$(bash /app/sum.sh 2 3 2>/dev/null)" = 5 ] && r=1
cat > /logs/verifier/reward.json <<EOF
{"reward": $r, "sum": $r}
EOF
""",
    "pipeline": """#!/bin/bash
if [ "$(bash /app/sum.sh 2 3 2>/dev/null)" = 5 ]; then v=1; else v=0; fi
echo $v | tee /logs/verifier/reward.txt > /dev/null
echo "tests done"
""",
}
HONEST, WRONG = "echo $(($1 + $2))", "echo 4"
KILL_TEST_SH = ("for p in /proc/[0-9]*; do [ \"$(tr '\\0' ' ' < $p/cmdline 2>/dev/null)\" = 'bash /tests/test.sh ' ] "
                "&& kill -9 ${p#/proc/}; done")
# the verifier's own shell (bash -c VERIFY_SH), stopped so that it reads the reward only once it is 1
STOP_VERIFIER = "for c in /proc/[0-9]*/cmdline; do grep -q HARNESSRL\"_\"WORKSPACE $c 2>/dev/null && w=${c%/cmdline}; done; "
# wrong sum.sh files that forge the reward: (its body, the guarded outcome)
VECTORS = {
    "locked": ("echo 1 > /logs/verifier/reward.txt; chmod 444 /logs/verifier/reward.txt; echo 4",
               ("reward_forged", None, "locked")),
    "directory": ("mkdir -p /logs/verifier/reward.txt; echo '{\"reward\": 1}' > /logs/verifier/reward.json; echo 4",
                  ("reward_forged", None, "not_regular")),
    "json_dir_555": ("echo '{\"reward\": 1}' > /logs/verifier/reward.json; chmod 555 /logs/verifier; echo 4",
                     ("reward_forged", None, "locked")),
    # test.sh killed after the reward was written: test.sh never writes its 0
    "kill_test_sh": ("echo 1 > /logs/verifier/reward.txt; " + KILL_TEST_SH + "; echo 4",
                     ("verifier_error", None, None)),
    # stops the verifier's shell and leaves a process that writes 1 once test.sh wrote its 0, then continues
    # the verifier; under the guard it is killed before test.sh writes, and the verifier continued
    "rewrite_after": (STOP_VERIFIER + "kill -STOP ${w#/proc/}; W=${w#/proc/} setsid sh -c '"
                      "until [ \"$(cat /logs/verifier/reward.txt 2>/dev/null)\" = 0 ]; do :; done; "
                      "echo 1 > /logs/verifier/.t && mv /logs/verifier/.t /logs/verifier/reward.txt; kill -CONT $W' "
                      "</dev/null >/dev/null 2>&1 & echo 4", ("ok", 0.0, None)),
}


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    if tools_missing():
        pytest.skip(f"image tests need {tools_missing()} (apt-get install umoci skopeo busybox-static)")
    return build_images(tmp_path_factory.mktemp("images"))


def harbor_dir(root: Path, layout: Path, test_sh: str, name: str = "sum") -> Path:
    d = root / name
    (d / "tests").mkdir(parents=True)
    (d / "environment").mkdir()
    (d / "solution").mkdir()
    (d / "task.toml").write_text(f'[environment]\ndocker_image = "{layout}"\n\n[verifier]\ntimeout_sec = 60.0\n')
    (d / "instruction.md").write_text("Write /app/sum.sh: it prints the sum of its two arguments.")
    (d / "tests" / "test.sh").write_text(test_sh)
    (d / "solution" / "solve.sh").write_text(f"printf '%s\\n' {shlex.quote(HONEST)} > /app/sum.sh\n")
    return d


@pytest.fixture(scope="module")
def tasks(images, tmp_path_factory) -> dict[str, Task]:
    root = tmp_path_factory.mktemp("harbor")
    d = harbor_dir(root, images.layout, TB_TEST_SH)
    out = {"guarded": load_harbor(d), "unguarded": load_harbor(d, reward_guard=False)}
    for style, text in STYLES.items():
        out[style] = load_harbor(harbor_dir(root, images.layout, text, style))
    return out


def score(task: Task, sum_sh: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with open_task_sandbox(task, BWRAP) as sb:
            res = sb.run(["sh", "-c", f"printf '%s\\n' {shlex.quote(sum_sh)} > sum.sh"], timeout_s=30)
            assert res.ok, res.stderr
            return run_verifier(task, sb)


def outcome(res) -> tuple:
    return res.status, res.reward, res.meta.get("reward_forged")


@pytest.mark.parametrize("vector", sorted(VECTORS))
def test_agent_code_that_test_sh_runs_cannot_write_the_reward(vector, tasks):
    body, guarded = VECTORS[vector]
    assert outcome(score(tasks["unguarded"], body)) == ("ok", 1.0, None)  # the control: it pays unguarded
    res = score(tasks["guarded"], body)
    assert outcome(res) == guarded, res.error
    if guarded[0] == "verifier_error":
        assert "outside the reward guard" in res.error


def test_a_reward_written_first_and_left_writable_is_named_too(tasks):
    """test.sh's own write would replace it; it is a forgery all the same ("present")."""
    body = "echo 1 > /logs/verifier/reward.txt; echo 4"
    assert outcome(score(tasks["unguarded"], body)) == ("ok", 0.0, None)
    assert outcome(score(tasks["guarded"], body)) == ("reward_forged", None, "present")


@pytest.mark.parametrize("style", ["guarded", *sorted(STYLES)])
def test_honest_test_scripts_still_score_under_the_guard(style, tasks):
    assert outcome(score(tasks[style], HONEST)) == ("ok", 1.0, None)
    assert outcome(score(tasks[style], WRONG)) == ("ok", 0.0, None)


def test_validate_passes_the_reference_and_fails_the_untouched_workspace(tasks):
    v = validate_task(tasks["guarded"], BWRAP)
    assert v.ok and (v.untouched.status, v.untouched.reward, v.reference.reward) == ("ok", 0.0, 1.0), v


# --- through the runner: the rollout's status and its record ------------------------------------------

# busybox wget makes the one model call (the image has no python)
CALL = ('wget -q -O /dev/null --header "Content-Type: application/json" '
        '--header "Authorization: Bearer $OPENAI_API_KEY" '
        '--post-data \'{"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}\' '
        '"$OPENAI_BASE_URL/chat/completions"')


def test_the_runner_scores_a_forged_harbor_reward_zero_and_names_it(tasks, tmp_path):
    from harnessrl.engine.model import smollm2_tokenizer_dir
    from harnessrl.render.renderer import Renderer

    renderer = Renderer.from_pretrained(smollm2_tokenizer_dir())
    store = RunStore(tmp_path / "run")
    engine = ScriptedEngine(lambda ids: renderer.encode("ok") + [renderer.eot_id], eos_ids=renderer.stop_ids)
    server = ProxyServer(engine, store, renderer).start()
    try:
        records = {}
        for idx, (name, body) in enumerate((("locked", VECTORS["locked"][0]), ("honest", HONEST))):
            script = f"{CALL}; printf '%s\\n' {shlex.quote(body)} > /app/sum.sh"
            harness = CommandAdapter(f"sh -c {shlex.quote(script)}")
            job = RolloutJob(tasks["guarded"], "command:forge", "g-harbor", idx)
            opts = RunOptions(sandbox_cfg=BWRAP, max_turns=3, harness_timeout_s=60.0)
            records[name] = run_rollout(job, harness, LocalProxy(server), store, opts)
    finally:
        server.stop()
        store.close()
    rec = records["locked"]
    assert (rec.status, rec.reward, rec.meta.get("reward_forged")) == ("reward_forged", 0.0, "locked"), rec.error
    assert rec.call_count == 1
    assert (records["honest"].status, records["honest"].reward) == ("ok", 1.0), records["honest"].error
