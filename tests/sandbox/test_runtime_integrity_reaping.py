"""The launcher reaps, as an init process should (issue 39, bwrap tier).

An honest harness that starts 1,000 short-lived background jobs: each one is orphaned (its subshell
exits first) and adopted by the launcher, the harness's child subreaper. The launcher now collects
every child that exits while the harness runs, so only live processes count against
``max_procs`` and the rollout ends ``ok`` with reward 1. The control is the launcher as it was
(the harness alone waited for, orphans reaped only at the end): the zombies fill the process limit,
forks fail, and the same honest work scores 0 with the ``procs`` limit hit.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harnessrl.engine.scripted import ScriptedEngine
from harnessrl.harness import launcher
from harnessrl.harness.command import CommandAdapter
from harnessrl.proxy.server import ProxyServer
from harnessrl.rollout.jobs import RolloutJob, RunOptions, run_rollout
from harnessrl.rollout.proxy_link import LocalProxy
from harnessrl.sandbox.base import SandboxConfig
from harnessrl.store import RunStore
from harnessrl.tasks.model import Task, Verifier

pytestmark = [
    pytest.mark.bwrap,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="no bubblewrap: apt-get install bubblewrap"),
]

CALL = """\
import json, os, urllib.request
body = json.dumps({"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}).encode()
req = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", body,
                             {"Content-Type": "application/json", "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
urllib.request.urlopen(req, timeout=60).read()
"""
# 1,000 background jobs, each orphaned at once; ok once all of them ran (at most 8 s of waiting)
HONEST = """\
python3 {d}/call.py
for i in $(seq 1000); do (echo x >> "$TMPDIR/jobs" &); done
for i in $(seq 80); do [ "$(wc -l < "$TMPDIR/jobs")" -ge 1000 ] && break; sleep 0.1; done
[ "$(wc -l < "$TMPDIR/jobs")" -ge 1000 ] && echo ok > out.txt || echo short > out.txt
"""
VERIFY = ("import json, pathlib\np = pathlib.Path('out.txt')\n"
          "print(json.dumps({'out': float(p.is_file() and p.read_text().strip() == 'ok')}))\n")
TASK = Task(id="jobs", instruction="Run 1,000 jobs.", files={"in.txt": b"x\n"},
            verifier=Verifier("checks", "python3 .verifier/verify.py", files={"verify.py": VERIFY.encode()}))
CFG = SandboxConfig(type="bwrap", max_procs=512, memory_mb=1024)
REAP_LINE = "        code = reap(proc.pid)"


@pytest.fixture(scope="module")
def script(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("jobs")
    (d / "call.py").write_text(CALL)
    (d / "honest.sh").write_text(HONEST.format(d=d))
    for p in [d, *d.iterdir()]:
        p.chmod(0o755)
    return d


@pytest.fixture(scope="module")
def renderer():
    from harnessrl.engine.model import smollm2_tokenizer_dir
    from harnessrl.render.renderer import Renderer

    return Renderer.from_pretrained(smollm2_tokenizer_dir())


@pytest.fixture
def proxy_and_store(renderer, tmp_path):
    store = RunStore(tmp_path / "run")
    engine = ScriptedEngine(lambda ids: renderer.encode("ok") + [renderer.eot_id], eos_ids=renderer.stop_ids)
    server = ProxyServer(engine, store, renderer).start()
    yield server, store
    server.stop()
    store.close()


def _rollout(script: Path, proxy, store, name: str):
    harness = CommandAdapter(f"sh {script}/honest.sh", ro=(script,))
    job = RolloutJob(TASK, f"command:{name}", f"g-{name}", 0)
    opts = RunOptions(sandbox_cfg=CFG, max_turns=3, harness_timeout_s=60.0, start_retries=0)
    return run_rollout(job, harness, LocalProxy(proxy), store, opts)


def _limits(rec) -> list[str]:
    return list((rec.meta.get("harness_meta") or {}).get("sandbox_limits", []))


def test_an_honest_rollout_with_1000_background_jobs_ends_ok(script, proxy_and_store):
    rec = _rollout(script, *proxy_and_store, "honest")
    assert (rec.status, rec.reward) == ("ok", 1.0), rec.error
    assert "procs" not in _limits(rec)


def test_control_without_reaping_the_zombies_starve_it(script, proxy_and_store, tmp_path, monkeypatch):
    """Defence off: the launcher waits for the harness alone (``proc.poll()``), as it did."""
    source = Path(launcher.__file__).read_text()
    assert REAP_LINE in source
    old = tmp_path / "launcher_without_reaping.py"
    old.write_text(source.replace(REAP_LINE, "        code = proc.poll()"))
    monkeypatch.setattr(launcher, "__file__", str(old))
    rec = _rollout(script, *proxy_and_store, "no_reaping")
    assert rec.reward == 0.0, (rec.status, rec.error)
    assert "procs" in _limits(rec)
