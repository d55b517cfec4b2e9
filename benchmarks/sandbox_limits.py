"""Sandbox limits at scale: misbehaving rollouts next to normal ones, all at once, through the runner.

    .venv/bin/python benchmarks/sandbox_limits.py [--normal 10] [--timeout 20] [--json out.json]

16 rollouts by default run concurrently (bwrap sandboxes, the real runner, proxy and store; a
scripted engine answers "ok"). Each one is a `command:` harness running behave.py from its task
files, which makes one model call and then does what its task says:

- normal (x --normal): writes answer.txt and exits: reward 1.
- forkbomb: forks until the kernel refuses (each child sleeps): capped by max_procs.
- forkbomb-sh: the shell classic `:(){ :|:& };:`, which never ends: capped, then killed at the
  harness timeout.
- diskfill: writes until ENOSPC in the workspace, /tmp and HOME (tmpfs sizes).
- memhog: allocates 16 MiB chunks until the OOM killer stops it (memory_mb).
- daemon: double-forks a setsid'd `sleep` and exits 0 (the daemon must die with the run).
- hang: starts a tree of `sleep`s and waits on them forever (killed at the harness timeout).

Reported: every rollout's recorded status, error and sandbox limits; the wall time past the
timeout at which a hanging rollout's tree was gone; host processes left behind (by marker: must
be 0).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
import uuid
import warnings
from pathlib import Path
from typing import Any

BEHAVE = r'''
import json, os, sys, time, urllib.request
mode, marker = sys.argv[1].split()
body = {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": mode}]}
req = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", json.dumps(body).encode(),
                             {"content-type": "application/json"})
reply = json.loads(urllib.request.urlopen(req, timeout=60).read())["choices"][0]["message"]["content"]
if mode in ("normal", "daemon"):
    if mode == "daemon" and os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execvp("sleep", ["sleep", marker])
        os._exit(0)
    open("answer.txt", "w").write(reply)
    print("done")
elif mode == "forkbomb":
    n = 0
    while True:
        try:
            pid = os.fork()
        except OSError as e:
            print(f"fork refused after {n} children: {e}", file=sys.stderr)
            sys.exit(3)
        if pid == 0:
            time.sleep(float(marker))
            os._exit(0)
        n += 1
elif mode == "forkbomb-sh":
    os.execvp("bash", ["bash", "-c", ":(){ :|:& };:; sleep " + marker])
elif mode == "diskfill":
    chunk, total = b"x" * (1 << 20), {}
    for where in (".", "/tmp", os.environ["HOME"]):
        n = 0
        try:
            with open(os.path.join(where, "fill.bin"), "wb") as f:
                while True:
                    f.write(chunk)
                    f.flush()
                    n += 1
        except OSError as e:
            total[where] = f"{n} MiB ({e.strerror})"
    print(json.dumps(total), file=sys.stderr)
    sys.exit(4)
elif mode == "memhog":
    hold = []
    while True:
        hold.append(b"m" * (16 << 20))
        print(f"{16 * len(hold)} MiB", file=sys.stderr, flush=True)
elif mode == "hang":
    os.execvp("sh", ["sh", "-c", f"sleep {marker} & sleep {marker} & wait"])
'''
MODES = ("forkbomb", "forkbomb-sh", "diskfill", "memhog", "daemon", "hang")
HARNESS = "command:python behave.py {task}"


def _task(mode: str, marker: str) -> Any:
    from harnessrl.tasks.model import Task, Verifier

    verifier = Verifier("reward_line", "test -s answer.txt && echo 1 || echo 0", timeout_s=60)
    return Task(id=f"limits-{mode}", instruction=f"{mode} {marker}", files={"behave.py": BEHAVE.encode()},
                verifier=verifier, category="limits")


def _host_pids(marker: str) -> list[int]:
    out = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True, check=False).stdout
    return [int(p) for p in out.split()]


def run_limits(*, normal: int = 10, timeout_s: float = 20.0, modes: tuple[str, ...] = MODES,
               memory_mb: int = 256, max_procs: int = 64, disk_mb: int = 64) -> dict[str, Any]:
    """Run the scenario once; returns per-rollout records and the host-side checks."""
    from harnessrl.engine.model import smollm2_tokenizer_dir
    from harnessrl.engine.scripted import ScriptedEngine
    from harnessrl.proxy.server import ProxyServer
    from harnessrl.render.renderer import Renderer
    from harnessrl.rollout.jobs import RunOptions, run_plans
    from harnessrl.rollout.plan import GroupPlan
    from harnessrl.sandbox.base import SandboxConfig
    from harnessrl.store import RunStore

    renderer = Renderer.from_pretrained(smollm2_tokenizer_dir())
    ok_ids = list(renderer.encode("ok")) + [renderer.eot_id]
    engine = ScriptedEngine(lambda ids: ok_ids, eos_ids=[renderer.eot_id], model_path="scripted")
    marker = f"{4000 + uuid.uuid4().int % 1000}.{uuid.uuid4().int % 10**6}"  # a sleep length, unique
    plans = [GroupPlan(f"limits-{m}", _task(m, marker), HARNESS, 1, "limits", 0) for m in modes]
    plans.append(GroupPlan("limits-normal", _task("normal", marker), HARNESS, normal, "limits", 0))
    cfg = SandboxConfig(type="bwrap", memory_mb=memory_mb, max_procs=max_procs, workspace_mb=disk_mb,
                        scratch_mb=disk_mb)
    opts = RunOptions(sandbox_cfg=cfg, harness_timeout_s=timeout_s, start_retries=0, max_turns=2)
    tmp = Path(tempfile.mkdtemp(prefix="harnessrl-limits-"))
    store = RunStore(tmp / "run")
    server = ProxyServer(engine, store, renderer).start()
    try:
        t0 = time.monotonic()
        records = run_plans(plans, proxy=server, store=store, opts=opts, concurrency=len(modes) + normal)
        wall = time.monotonic() - t0
        left_at_end = _host_pids(marker)
        calls = {r.rollout_id: store.count_calls(r.rollout_id) for r in records}
    finally:
        server.stop()
        store.close()
    shutil.rmtree(tmp, ignore_errors=True)
    rows = []
    for r in records:
        hmeta = r.meta.get("harness_meta", {}) if isinstance(r.meta, dict) else {}
        rows.append({"rollout": r.rollout_id, "mode": r.task_id.removeprefix("limits-"), "status": r.status,
                     "reward": r.reward, "limits": hmeta.get("sandbox_limits", []), "calls": calls[r.rollout_id],
                     "harness_s": round(r.durations.get("harness_s", 0.0), 2),
                     "total_s": round(r.durations.get("total_s", 0.0), 2), "error": (r.error or "")[:160]})
    return {"rollouts": rows, "wall_s": round(wall, 1), "left_processes": left_at_end,
            "timeout_s": timeout_s,
            "limits": {"memory_mb": memory_mb, "max_procs": max_procs, "workspace_mb": disk_mb,
                       "scratch_mb": disk_mb}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--normal", type=int, default=10, help="normal rollouts beside the 6 misbehaving ones")
    ap.add_argument("--timeout", type=float, default=20.0, help="harness timeout (s)")
    ap.add_argument("--json", type=Path, default=None, help="also write the result here")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    out = run_limits(normal=args.normal, timeout_s=args.timeout)
    print(f"{len(out['rollouts'])} concurrent rollouts in {out['wall_s']} s; limits {out['limits']}; "
          f"harness timeout {out['timeout_s']} s")
    print(f"{'mode':12} {'status':14} {'limits':14} {'calls':>5} {'harness_s':>9}  error")
    for row in out["rollouts"]:
        print(f"{row['mode']:12} {row['status']:14} {','.join(row['limits']) or '-':14} {row['calls']:>5} "
              f"{row['harness_s']:>9}  {row['error'][:90]}")
    print(f"host processes left (by marker): {len(out['left_processes'])}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    main()
