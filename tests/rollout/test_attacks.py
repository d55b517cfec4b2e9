"""The policy is the adversary: a scripted "policy" (a `command:` harness, real bubblewrap, a real
proxy) tries each way to forge its reward, dodge being scored or damage the host, and its record
says what it got (issue 20). Each case failed before the fix it names.

Every attack first makes one model call (the policy has sampled something, so its end must be
scored), except where the case says otherwise. The verifier pays 1 only for `out.txt` == "ok".
"""

from __future__ import annotations

import os
import stat
from dataclasses import replace
from pathlib import Path

import pytest

from harnessrl.engine.scripted import ScriptedEngine
from harnessrl.harness.command import CommandAdapter
from harnessrl.proxy.server import ProxyServer
from harnessrl.rollout.jobs import RolloutJob, RunOptions, run_groups, run_rollout
from harnessrl.rollout.proxy_link import LocalProxy
from harnessrl.sandbox.base import SandboxConfig
from harnessrl.sandbox.health import HostUnfit
from harnessrl.tasks.model import Task, Verifier

pytestmark = pytest.mark.bwrap

BWRAP = SandboxConfig(type="bwrap")
CANARY = "HARNESSRL_ATTACK_CANARY"
CALL = """\
import json, os, urllib.request
body = json.dumps({"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}).encode()
req = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", body,
                             {"Content-Type": "application/json", "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
urllib.request.urlopen(req, timeout=60).read()
"""
VERIFY = ("import json, pathlib\np = pathlib.Path('out.txt')\n"
          "print(json.dumps({'out': float(p.is_file() and p.read_text().strip() == 'ok')}))\n")
TASK = Task(id="attack", instruction="Write ok into out.txt.", files={"in.txt": b"x\n"},
            verifier=Verifier("checks", "python3 .verifier/verify.py", files={"verify.py": VERIFY.encode()}))
# a verifier that runs the agent's code first (like `python3 test_calc.py`)
RUNS_AGENT_CODE = replace(TASK, verifier=Verifier(
    "checks", "python3 solution.py > /dev/null 2>&1; python3 .verifier/verify.py", files={"verify.py": VERIFY.encode()}))
# verifiers whose output the agent's files shape
ECHOES_LINES = replace(TASK, verifier=Verifier("reward_line", "cat out.txt"))
ECHOES_JSON = replace(TASK, verifier=Verifier("checks", "cat out.txt"))

SCRIPTS = {
    "honest": "call; echo ok > out.txt",
    "honest_fail": "call; echo no > out.txt",
    # hole 4: a module planted at the verifier's path shadowed its `import json` (reward 1.0)
    "plant_module": "call; mkdir -p .verifier; "
                    "printf 'print(\"{\\\\\"out\\\\\": 1}\")\\nraise SystemExit(0)\\n' > .verifier/json.py",
    # the agent's code, run by the verifier, rewrites the verifier's own script
    "rewrite_verifier": "call; printf 'open(\".verifier/verify.py\", \"w\").write(\"print(1)\")\\n' > solution.py",
    # hole 5: the harness kills its whole process tree (the keeper was pid 2: the sandbox died, not scored)
    "kill_tree": "call; echo ok > out.txt; kill -9 -1; kill -9 $$",
    "kill_tree_no_call": "kill -9 -1; kill -9 $$",
    "crash": "call; exit 3",
    "stall": "call; sleep 600",
    # hole 5: a verifier line of 5,000 digits crashed the runner's parse (harness_error, not scored)
    "digits": "call; python3 -c \"print('7' * 5000); print(0)\" > out.txt",
    "deep_json": "call; python3 -c \"print('[' * 100000)\" > out.txt",
    # hole 1: host device nodes and kernel settings were writable (the sandbox user was host root)
    "damage_host": "call; chmod 0022 /dev/null; echo 59 > /proc/sys/vm/swappiness; "
                   "echo '|/tmp/x' > /proc/sys/kernel/core_pattern; echo ok > out.txt",
    # hole 2: the runner's environment was readable in /proc/1/environ
    "read_env": "call; cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c " + CANARY + " || true",
}


@pytest.fixture(scope="module")
def attacks(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("attacks")
    (d / "call.py").write_text(CALL)
    for name, body in SCRIPTS.items():
        (d / f"{name}.sh").write_text(f"call() {{ python3 {d}/call.py; }}\n{body}\n")
    for p in [d, *d.iterdir()]:
        p.chmod(0o755)
    return d


@pytest.fixture
def proxy(renderer, store):
    engine = ScriptedEngine(lambda ids: renderer.encode("ok") + [renderer.eot_id], eos_ids=renderer.stop_ids)
    server = ProxyServer(engine, store, renderer).start()
    yield server
    server.stop()


def attack(name, attacks, proxy, store, task=TASK, idx=0, **opts):
    harness = CommandAdapter(f"sh {attacks}/{name}.sh", ro=(attacks,))
    job = RolloutJob(task, f"command:{name}", f"g-{name}", idx)
    options = RunOptions(**{"sandbox_cfg": BWRAP, "max_turns": 3, "harness_timeout_s": 60.0, **opts})
    return run_rollout(job, harness, LocalProxy(proxy), store, options)


def outcome(rec):
    return rec.status, rec.reward, rec.meta.get("attempts")


def test_controls_the_verifier_pays_only_for_the_job(attacks, proxy, store):
    assert outcome(attack("honest", attacks, proxy, store)) == ("ok", 1.0, 1)
    assert outcome(attack("honest_fail", attacks, proxy, store)) == ("ok", 0.0, 1)


def test_the_agent_cannot_replace_the_verifiers_code(attacks, proxy, store):
    rec = attack("plant_module", attacks, proxy, store)
    assert outcome(rec) == ("ok", 0.0, 1) and rec.checks == {"out": 0.0}
    rec = attack("rewrite_verifier", attacks, proxy, store, task=RUNS_AGENT_CODE)
    assert outcome(rec) == ("ok", 0.0, 1) and rec.checks == {"out": 0.0}


def test_killing_its_own_process_tree_is_the_policys_end_and_scored(attacks, proxy, store):
    rec = attack("kill_tree", attacks, proxy, store)
    assert outcome(rec) == ("harness_error", 1.0, 1)  # the workspace it left is what counts
    # with no model call at all it is a start failure: retried, then left out (no reward)
    rec = attack("kill_tree_no_call", attacks, proxy, store, start_retries=2)
    assert outcome(rec) == ("harness_error", None, 3) and rec.call_count == 0


def test_crashing_or_stalling_after_a_call_scores_the_workspace(attacks, proxy, store):
    assert outcome(attack("crash", attacks, proxy, store)) == ("harness_error", 0.0, 1)
    rec = attack("stall", attacks, proxy, store, idx=1, harness_timeout_s=20)  # its call is served well before
    assert outcome(rec) == ("timeout", 0.0, 1)


def test_any_verifier_output_is_a_score_never_a_runner_crash(attacks, proxy, store):
    rec = attack("digits", attacks, proxy, store, task=ECHOES_LINES)
    assert outcome(rec) == ("ok", 0.0, 1)  # the 5,000-digit line is not a check; the last line is 0
    rec = attack("deep_json", attacks, proxy, store, task=ECHOES_JSON)
    assert outcome(rec) == ("verifier_error", 0.0, 1) and "not a JSON object" in rec.error


def test_the_sandbox_cannot_touch_host_devices_or_kernel_settings(attacks, proxy, store):
    knobs = [Path("/proc/sys/vm/swappiness"), Path("/proc/sys/kernel/core_pattern")]
    before_null = os.stat("/dev/null").st_mode
    before = [k.read_text() for k in knobs]
    try:
        rec = attack("damage_host", attacks, proxy, store)
        after_null, after = os.stat("/dev/null").st_mode, [k.read_text() for k in knobs]
    finally:  # on a host without the fix this test damages it: put everything back
        if os.stat("/dev/null").st_mode != before_null and os.geteuid() == 0:
            os.chmod("/dev/null", stat.S_IMODE(before_null))
        for k, text in zip(knobs, before):
            if k.read_text() != text and os.geteuid() == 0:
                k.write_text(text)
    assert after_null == before_null and stat.S_IMODE(after_null) == 0o666
    assert after == before
    assert outcome(rec) == ("ok", 1.0, 1)  # the attempts failed inside; the job itself was done


def test_the_runners_environment_does_not_reach_the_sandbox(attacks, proxy, store, monkeypatch):
    monkeypatch.setenv(CANARY, "hf_secret_token")
    rec = attack("read_env", attacks, proxy, store)
    assert rec.status == "ok" and rec.meta["final_message"].strip() == "0", rec.meta["final_message"]


def test_a_damaged_host_is_named_before_any_rollout(attacks, proxy, store, tmp_path, monkeypatch):
    """A device node changed on the host: the batch stops with HostUnfit naming it and the fix,
    not with 'check the harness install' after every rollout failed."""
    import harnessrl.sandbox.health as health

    fake = tmp_path / "null"
    fake.write_text("")  # a regular file where a character device should be
    monkeypatch.setattr(health, "DEVICES", (*health.DEVICES, str(fake)))
    with pytest.raises(HostUnfit, match="not a character device"):
        run_groups([TASK], [f"command:sh {attacks}/honest.sh"], 1, proxy=proxy, store=store, sandbox_cfg=BWRAP,
                   progress=False, harness_options={f"command:sh {attacks}/honest.sh": {"ro": (attacks,)}})
    assert store.list_rollouts() == []
    if os.geteuid() == 0:  # a real character device with the mode the base model once gave /dev/null
        node = tmp_path / "bad-null"
        os.mknod(node, stat.S_IFCHR | 0o022, os.makedev(1, 3))
        with pytest.raises(HostUnfit, match=r"chmod 666 .*bad-null"):
            health.check_host_devices((str(node),))
