"""The verifier runner (local sandbox): checks -> reward, and every way a verifier can fail is a
verifier_error with no reward, never a 0."""

from __future__ import annotations

import re
import warnings

import pytest

from harnessrl.sandbox.base import SandboxConfig
from harnessrl.tasks.model import Task, Verifier
from harnessrl.rollout.task_sandbox import open_task_sandbox
from harnessrl.tasks.verifier import VerifierOutputError, parse_output, run_verifier

LOCAL = SandboxConfig(type="local")


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def task_with(script: str, kind: str = "checks", timeout_s: float = 30.0, name: str = "verify.py") -> Task:
    runner = "python3" if name.endswith(".py") else "bash"
    return Task(id="t", instruction="do it", files={"a.txt": b"hello\n"},
                verifier=Verifier(kind=kind, command=f"{runner} .verifier/{name}", files={name: script.encode()},
                                  timeout_s=timeout_s))


def verify(task: Task, payload=None):
    with open_task_sandbox(task, LOCAL) as sb:
        assert not (sb.workspace / ".verifier").exists()  # the agent never sees the verifier
        return run_verifier(task, sb, payload)


def test_checks_mean_and_names():
    res = verify(task_with("import json, os\nprint(json.dumps({'a': 1, 'b': os.path.exists('b.txt'), 'c': 0.5}))"))
    assert res.status == "ok"
    assert res.checks == {"a": 1.0, "b": 0.0, "c": 0.5}
    assert res.reward == pytest.approx(0.5)


def test_explicit_reward_wins():
    res = verify(task_with("print('noise')\nprint('{\"a\": 1, \"reward\": 0.25}')"))
    assert (res.status, res.reward, res.checks) == ("ok", 0.25, {"a": 1.0})


def test_reward_line_kind_and_payload():
    script = ('import json, os\np = json.load(open(os.environ["OPENCLAW_REWARD_PAYLOAD"]))\n'
              'print(json.dumps({"said": float(p["final_message"] == "done")}))\nprint(0.75)\n')
    res = verify(task_with(script, kind="reward_line"), {"final_message": "done"})
    assert (res.status, res.reward, res.checks) == ("ok", 0.75, {"said": 1.0})


@pytest.mark.parametrize("script, error", [
    ("print('all good, trust me')", "not a JSON object"),
    ("raise SystemExit(3)", "exited 3"),
    ("raise RuntimeError('boom')", "exited 1"),
    ("print('{\"a\": 2}')", "in \\[0, 1\\]"),
    ("print('{\"a\": \"yes\"}')", "not a number"),
    ("print('{}')", "no checks"),
    ("", "printed nothing"),
])
def test_broken_verifier_is_an_error_not_zero(script, error):
    res = verify(task_with(script))
    assert res.status == "verifier_error"
    assert res.reward is None
    assert re.search(error, res.error), res.error


def test_reward_line_garbage_and_timeout():
    res = verify(task_with("echo 0.5\necho not-a-number\n", kind="reward_line", name="verify.sh"))
    assert res.status == "verifier_error" and "not a number" in res.error
    res = verify(task_with("sleep 30\necho 1\n", kind="reward_line", name="verify.sh", timeout_s=1.0))
    assert res.status == "verifier_error" and "timed out" in res.error and res.reward is None


def test_parse_output_units():
    assert parse_output("reward_line", "log\n{\"x\": 1}\n0.5\n") == (0.5, {"x": 1.0})
    assert parse_output("checks", '{\n "a": true,\n "b": false\n}\n') == (0.5, {"a": 1.0, "b": 0.0})
    with pytest.raises(VerifierOutputError):
        parse_output("reward_line", "1.5\n")
    with pytest.raises(VerifierOutputError):
        parse_output("checks", '["a"]')
