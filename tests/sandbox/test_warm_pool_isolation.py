"""Attack: a warm pool (rollout/jobs.py WarmStarts, sandbox/pool.py) must not let one rollout reach
the next. The policy of rollout 1 plants what could outlive it — files in HOME, /tmp, /dev/shm and
the workspace, a harness config file and session, a setsid daemon and a listening socket — while
rollout 2's sandbox, made ahead of need, already waits in the pool; rollout 2 (the same script)
looks for every one of them and writes "ok" only when it finds none. Control: the same probe finds
every plant when two runs share one sandbox (the first one's daemons kept alive), so a clean second
rollout is the pool's isolation, not a blind probe. Real bubblewrap, a real proxy (each rollout
makes one model call, so both are scored)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harnessrl.engine.scripted import ScriptedEngine
from harnessrl.harness.command import CommandAdapter
from harnessrl.proxy.server import ProxyServer
from harnessrl.rollout.jobs import RunOptions, run_plans
from harnessrl.rollout.plan import plan_cross
from harnessrl.rollout.proxy_link import LocalProxy
from harnessrl.sandbox import SandboxConfig, make_sandbox
from harnessrl.store import RunStore
from harnessrl.tasks.model import Task, Verifier

pytestmark = pytest.mark.bwrap

BWRAP = SandboxConfig(type="bwrap")
CALL = """\
import json, os, urllib.request
body = json.dumps({"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}).encode()
req = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", body,
                             {"Content-Type": "application/json", "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
urllib.request.urlopen(req, timeout=60).read()
"""
# look for every plant, then plant them all; out.txt says "ok" or which plants were found
PROBE_AND_PLANT = r"""
found=""
[ -e "$HOME/planted" ] && found="$found home"
[ -e /tmp/planted ] && found="$found tmp"
[ -e /dev/shm/planted ] && found="$found shm"
[ -e planted_ws ] && found="$found workspace"
[ -e "$HOME/.openclaw/openclaw.json" ] && found="$found config"
[ -e "$HOME/.openclaw/agents/main/sessions/planted.jsonl" ] && found="$found session"
python3 -c "import socket; socket.create_connection(('127.0.0.1', 45678), timeout=2)" 2>/dev/null && found="$found listener"
for f in /proc/[0-9]*/cmdline; do
  tr '\0' ' ' < "$f" 2>/dev/null | grep -q harnessrl-planted-daemon && found="$found process" && break
done
touch "$HOME/planted" /tmp/planted /dev/shm/planted planted_ws
mkdir -p "$HOME/.openclaw" && echo '{"agents": {"defaults": {"model": "planted"}}}' > "$HOME/.openclaw/openclaw.json"
mkdir -p "$HOME/.openclaw/agents/main/sessions" && echo '{"role": "user"}' > "$HOME/.openclaw/agents/main/sessions/planted.jsonl"
setsid python3 -c "import socket, time; s = socket.socket(); s.bind(('127.0.0.1', 45678)); s.listen(); time.sleep(300)" \
  > /dev/null 2>&1 < /dev/null &
setsid bash -c 'exec -a harnessrl-planted-daemon sleep 300' > /dev/null 2>&1 < /dev/null &
if [ -z "$found" ]; then echo ok > out.txt; else echo "found:$found" > out.txt; fi
"""
# reward 1 only for "ok"; a check per plant found (or "no_out"), so a failure names what leaked
VERIFY = ("import json, pathlib\np = pathlib.Path('out.txt')\n"
          "text = p.read_text().strip() if p.is_file() else ''\n"
          "clean = float(text == 'ok')\n"
          "found = {'found_' + w: 1.0 for w in text.removeprefix('found:').split()} if text.startswith('found:') else {}\n"
          "print(json.dumps({'reward': clean, 'clean': clean, **found, **({} if text else {'no_out': 1.0})}))\n")
TASK = Task(id="warm-attack", instruction="Plant.", files={"in.txt": b"x\n"},
            verifier=Verifier("checks", "python3 .verifier/verify.py", files={"verify.py": VERIFY.encode()}))
ALL = "found: home tmp shm workspace config session listener process"


@pytest.fixture
def scripts(tmp_path) -> Path:
    d = tmp_path / "scripts"
    d.mkdir()
    (d / "call.py").write_text(CALL)
    (d / "plant.sh").write_text(PROBE_AND_PLANT)
    (d / "rollout.sh").write_text(f"python3 {d}/call.py\nsh {d}/plant.sh\n")
    for p in [tmp_path, d, *d.iterdir()]:
        p.chmod(0o755)
    return d


def test_control_the_probe_finds_every_plant_in_a_shared_sandbox(scripts, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    cfg = BWRAP.model_copy(update={"extra_ro_binds": [str(scripts)]})
    with make_sandbox(cfg, workspace_src=ws) as sb:
        first = sb.run(["sh", f"{scripts}/plant.sh"], keep_background=True, timeout_s=60)
        assert first.ok, first.stderr
        assert sb.run(["cat", "out.txt"]).stdout.strip() == "ok"
        second = sb.run(["sh", f"{scripts}/plant.sh"], timeout_s=60)
        assert second.ok, second.stderr
        assert sb.run(["cat", "out.txt"]).stdout.strip() == ALL


def test_a_pooled_sandbox_holds_nothing_of_the_rollout_before(scripts, tmp_path):
    from harnessrl.engine.model import smollm2_tokenizer_dir
    from harnessrl.render.renderer import Renderer

    renderer = Renderer.from_pretrained(smollm2_tokenizer_dir())
    store = RunStore(tmp_path / "run")
    engine = ScriptedEngine(lambda ids: renderer.encode("ok") + [renderer.eot_id], eos_ids=renderer.stop_ids)
    server = ProxyServer(engine, store, renderer).start()
    spec = "command:planter"
    harness = CommandAdapter(f"sh {scripts}/rollout.sh", ro=(str(scripts),))
    try:
        plans = plan_cross([TASK], [spec], 3, step=0, attempt=0, split="rollout")
        # one at a time, two made ahead: rollout 2's and 3's sandboxes wait in the pool while 1 plants
        opts = RunOptions(sandbox_cfg=BWRAP, max_turns=3, harness_timeout_s=60.0, warm=2)
        records = run_plans(plans, proxy=LocalProxy(server), store=store, opts=opts, adapters={spec: harness},
                            concurrency=1)
    finally:
        server.stop()
        store.close()
    assert [(r.status, r.reward, r.checks) for r in records] == [("ok", 1.0, {"clean": 1.0})] * 3, \
        [(r.status, r.error, r.call_count, r.meta.get("warm_sandbox")) for r in records]
    assert all(r.meta.get("warm_sandbox") for r in records[1:])  # served by the pool
    assert all(r.call_count == 1 for r in records)
