"""One OpenClaw `agent exec` start, outside any sandbox, against an in-process stub model (one
streamed "OK." reply): wall, CPU seconds (user + system of its process tree), wall to its first model
call and peak RSS; optionally a V8 CPU profile summed by script (issue 43 item 3: where the start-up
goes). The config is the adapter's (harness/openclaw.py) for the profile given, with the adapter's
start-up env; `--drop` removes env names, `--env K=V` and `--node-flag` add to it.

    .venv/bin/python benchmarks/openclaw_profile.py [--profile small] [--drop OPENCLAW_NO_RESPAWN]
        [--env K=V ...] [--node-flag=--max-semi-space-size=64 ...] [--cpu-prof DIR] [--dump-request FILE]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def chunk(delta: dict, finish: str | None = None, usage: dict | None = None) -> bytes:
    body: dict = {"id": "w", "object": "chat.completion.chunk", "created": 0, "model": "m",
                  "choices": [] if usage else [{"index": 0, "delta": delta, "finish_reason": finish}]}
    if usage:
        body["usage"] = usage
    return ("data: " + json.dumps(body) + "\n\n").encode()


def stub(first: dict, dump: str | None) -> ThreadingHTTPServer:
    class H(BaseHTTPRequestHandler):
        def log_message(self, *a: object) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if "t" not in first:
                first["t"] = time.monotonic()
                if dump:
                    Path(dump).write_bytes(body)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            self.wfile.write(chunk({"role": "assistant", "content": "OK."}))
            self.wfile.write(chunk({}, "stop"))
            self.wfile.write(chunk({}, usage={"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}))
            self.wfile.write(b"data: [DONE]\n\n")

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def summarise(prof_dir: Path, top: int = 15) -> None:
    for f in sorted(prof_dir.glob("*.cpuprofile")):
        p = json.loads(f.read_text())
        nodes = {n["id"]: n for n in p["nodes"]}
        self_us: collections.Counter = collections.Counter()
        for s, d in zip(p["samples"], p["timeDeltas"]):
            self_us[s] += d
        by_script: collections.Counter = collections.Counter()
        for nid, us in self_us.items():
            cf = nodes[nid]["callFrame"]
            by_script[cf["url"].rsplit("/", 1)[-1] or f"({cf['functionName']})"] += us / 1e6
        total = sum(by_script.values())
        idle = by_script.get("((idle))", 0.0)
        print(f"{f.name}: {total:.1f} s profiled, {total - idle:.1f} s busy on the main thread")
        for name, s in by_script.most_common(top):
            print(f"  {s:6.2f}  {name}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--profile", default="small")
    p.add_argument("--drop", nargs="*", default=[], help="env names of the adapter's launch env to leave out")
    p.add_argument("--env", nargs="*", default=[], help="K=V added to the env")
    p.add_argument("--node-flag", action="append", default=[], help="a flag for node itself")
    p.add_argument("--cpu-prof", help="write V8 CPU profiles here and sum them by script")
    p.add_argument("--dump-request", help="write the first model request's body here")
    args = p.parse_args()
    from harnessrl.harness import install, make_harness
    from harnessrl.harness.base import RunDirs, RunRequest

    first: dict = {}
    srv = stub(first, args.dump_request)
    home = Path(tempfile.mkdtemp(prefix="openclaw-prof-home-"))
    ws = Path(tempfile.mkdtemp(prefix="openclaw-prof-ws-"))
    adapter = make_harness(f"openclaw:{args.profile}")
    problem = adapter.preflight()  # installed, compile cache warm
    if problem:
        print(f"openclaw cannot run: {problem}")
        return 1
    req = RunRequest("Reply with OK.", f"http://127.0.0.1:{srv.server_address[1]}", "k", "m", 300.0, 4, str(ws),
                     RunDirs("prof"))
    spec = adapter.build(req)
    if spec.argv[1:3] != ["agent", "exec"]:
        print("exec-mode profiles only (full, lean, small)")
        return 1
    run_dir = home / ".harnessrl" / "prof"

    def host(a: str) -> str:  # the launcher's @RUN@ (harness/launcher.py), here on the host
        return a.replace("@RUN@", str(run_dir))

    for d in spec.dirs:
        Path(host(d)).mkdir(parents=True, exist_ok=True)
    for path, text in spec.files.items():
        real = Path(host(path))
        real.parent.mkdir(parents=True, exist_ok=True)
        real.write_text(text)

    env = {k: host(v).replace("@PATH@", "/usr/bin:/bin") for k, v in spec.env.items() if k not in args.drop}
    env |= dict(kv.split("=", 1) for kv in args.env)
    argv = [host(a) for a in spec.argv]
    node = str(install.node24_bin_dir(adapter.cache) / "node")
    flags = [*args.node_flag, *(["--cpu-prof", f"--cpu-prof-dir={args.cpu_prof}"] if args.cpu_prof else [])]
    argv = [node, *flags, *argv]
    t0, r0 = time.monotonic(), resource.getrusage(resource.RUSAGE_CHILDREN)
    res = subprocess.run(argv, env=env, cwd=ws, capture_output=True, text=True)
    t1, r1 = time.monotonic(), resource.getrusage(resource.RUSAGE_CHILDREN)
    srv.shutdown()
    out = {"rc": res.returncode, "wall_s": round(t1 - t0, 2),
           "cpu_s": round(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime, 2),
           "to_first_call_s": round(first["t"] - t0, 2) if "t" in first else None,
           "maxrss_mib": r1.ru_maxrss // 1024, "answered": '"final"' in res.stdout,
           "load": os.getloadavg()[0]}
    print(json.dumps(out))
    if res.returncode != 0:
        print(res.stderr[-2000:], file=sys.stderr)
    if args.cpu_prof:
        summarise(Path(args.cpu_prof))
    return 0 if res.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
