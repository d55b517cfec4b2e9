"""In-sandbox driver for OpenClaw's gateway mode: start `openclaw gateway`, send ONE chat turn, stop.

Standard library only; the OpenClaw adapter writes this file into the run's private dir and runs
it with the launcher (which bounds it and kills the whole tree). Steps: pick a free loopback port,
put it and a fresh token into the config's `gateway` section, start the gateway, wait until
`GET /health` answers ok, POST the task to `/v1/chat/completions` (non-streamed), print one JSON
line `{"final_message", "status", ...}`, stop the gateway. Exit 0 on a reply, 1 otherwise.

    python openclaw_gateway.py --openclaw BIN --config CFG --task-file T --timeout S
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from typing import Any


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_gateway_config(path: str, port: int, token: str) -> None:
    with open(path, encoding="utf-8") as f:
        cfg = json.load(f)
    cfg["gateway"] = {"port": port, "mode": "local", "bind": "loopback",
                      "auth": {"mode": "token", "token": token},
                      "http": {"endpoints": {"chatCompletions": {"enabled": True}}},
                      "tailscale": {"mode": "off"}}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=2)


def wait_healthy(port: int, proc: subprocess.Popen[bytes], deadline: float) -> str | None:
    url = f"http://127.0.0.1:{port}/health"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return f"gateway exited with code {proc.returncode} before it was ready"
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                if json.loads(r.read() or b"{}").get("ok"):
                    return None
        except (OSError, ValueError):
            pass
        time.sleep(0.5)
    return "gateway did not become healthy in time"


def chat_turn(port: int, token: str, task: str, timeout_s: float) -> dict[str, Any]:
    body = json.dumps({"model": "openclaw", "stream": False, "user": f"harnessrl-{secrets.token_hex(4)}",
                       "messages": [{"role": "user", "content": task}]}).encode()
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=body, method="POST",
                                 headers=headers)
    with urllib.request.urlopen(req, timeout=max(timeout_s, 1)) as r:
        return json.loads(r.read())


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--openclaw", required=True)
    p.add_argument("--config", required=True)
    p.add_argument("--task-file", required=True)
    p.add_argument("--timeout", type=float, default=600)
    args = p.parse_args()
    deadline = time.monotonic() + args.timeout
    with open(args.task_file, encoding="utf-8") as f:
        task = f.read()
    port, token = free_port(), secrets.token_urlsafe(18)
    write_gateway_config(args.config, port, token)
    env = dict(os.environ, OPENCLAW_GATEWAY_TOKEN=token)
    argv = [args.openclaw, "gateway", "--bind", "loopback", "--port", str(port), "--token", token]
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=sys.stderr, stderr=sys.stderr)
    out = {"status": "error", "final_message": "", "gateway_port": port}
    try:
        problem = wait_healthy(port, proc, deadline)
        out["ready_s"] = round(args.timeout - (deadline - time.monotonic()), 1)
        if problem:
            out["error"] = problem
        else:
            reply = chat_turn(port, token, task, deadline - time.monotonic())
            choices = reply.get("choices") or [{}]
            out.update(status="ok", final_message=(choices[0].get("message") or {}).get("content") or "",
                       usage=reply.get("usage"))
    except (OSError, ValueError) as e:  # HTTP errors, timeouts, bad JSON
        detail = e.read().decode(errors="replace")[:500] if isinstance(e, urllib.error.HTTPError) else ""
        out["error"] = f"{type(e).__name__}: {e} {detail}".strip()
    finally:
        stop(proc)
    print(json.dumps(out), flush=True)
    return 0 if out["status"] == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
