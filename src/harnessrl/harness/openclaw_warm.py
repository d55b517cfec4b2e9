"""A pre-warmed, read-only Node compile cache for OpenClaw (start-up cost, issue 8 item 7).

OpenClaw loads ~1,400 ES modules at every start. Node can keep their compiled V8 code in a
compile cache (NODE_COMPILE_CACHE), but a rollout's private TMPDIR/HOME make every cache cold, and
writing a 30+ MB cache per rollout costs more than it saves (hence the adapter's
NODE_DISABLE_COMPILE_CACHE=1 without it). Here the cache is filled ONCE, by a warm-up run of OpenClaw
inside a sandbox against an in-sandbox stub model server (one fixed text reply, no tool is run), and
copied into `<openclaw install dir>/node-compile-cache`. That dir lies inside the install dir, which
every OpenClaw sandbox already binds read-only: each rollout reads the cache and writes nothing
(Node skips persisting entries that did not change). Per-rollout isolation is untouched: the cache
holds compiled harness code only, never task data.

Node names the cache subdir after the uid (`v<node>-<arch>-<hash>-<uid>`); the copy is made for the
warm-up's uid and the host's, so bwrap (uid 1000) and local sandboxes both find it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:
    from harnessrl.harness.openclaw import OpenClawAdapter
    from harnessrl.sandbox import SandboxConfig

CACHE_NAME = "node-compile-cache"
MARKER = ".harnessrl-warm"
WARM_TIMEOUT_S = 600.0
STUB_PORT = 18411  # in the sandbox's own network namespace (bwrap): always free there

# stdlib-only in-sandbox stub: answers every chat-completions call with one streamed text reply,
# then runs the command given after `--` and exits with its code
STUB = r'''
import json, subprocess, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

def chunk(delta, finish=None, usage=None):
    body = {"id": "warm", "object": "chat.completion.chunk", "created": 0, "model": "warm",
            "choices": [] if usage else [{"index": 0, "delta": delta, "finish_reason": finish}]}
    if usage:
        body["usage"] = usage
    return ("data: " + json.dumps(body) + "\n\n").encode()

class H(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Type", "application/json"); self.end_headers()
        self.wfile.write(b'{"object": "list", "data": [{"id": "warm", "object": "model"}]}')
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200); self.send_header("Content-Type", "text/event-stream"); self.end_headers()
        self.wfile.write(chunk({"role": "assistant", "content": "OK."}))
        self.wfile.write(chunk({}, "stop"))
        self.wfile.write(chunk({}, usage={"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}))
        self.wfile.write(b"data: [DONE]\n\n")

srv = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H)
threading.Thread(target=srv.serve_forever, daemon=True).start()
sys.exit(subprocess.call(sys.argv[3:]))
'''


def cache_dir(cache: Path | None = None) -> Path:
    from harnessrl.harness import install

    return install.harness_dir("openclaw", cache) / CACHE_NAME


def is_warm(cache: Path | None = None) -> bool:
    return (cache_dir(cache) / MARKER).is_file()


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def failed_marker(cache: Path | None = None) -> Path:
    return cache_dir(cache).parent / f".{CACHE_NAME}.failed"


def warm(adapter: OpenClawAdapter, sandbox_cfg: SandboxConfig | None = None, timeout_s: float = WARM_TIMEOUT_S,
         force: bool = False) -> str | None:
    """Fill the compile cache of `adapter.cache` once (idempotent, under a file lock), with a run of
    `adapter` (the OpenClaw adapter's `warmup_adapter()`: full profile, no cache of its own). Returns
    None when the cache is warm, else why it could not be warmed (the adapter then runs without it).
    A failed warm-up is remembered on disk and not retried unless `force` (one failure must not cost
    every run)."""
    cache = adapter.cache
    target = cache_dir(cache)
    if is_warm(cache):
        return None
    failed = failed_marker(cache)
    if failed.is_file() and not force:
        return f"an earlier warm-up failed ({failed}): {failed.read_text()[:300]}"
    with _lock(target.parent / f".{CACHE_NAME}.lock"):
        if is_warm(cache):
            return None
        if failed.is_file() and not force:
            return f"an earlier warm-up failed ({failed}): {failed.read_text()[:300]}"
        problem = _warm_locked(target, adapter, sandbox_cfg, timeout_s)
        if problem:
            failed.write_text(problem)
        else:
            failed.unlink(missing_ok=True)
        return problem


def _warm_locked(target: Path, adapter: OpenClawAdapter, sandbox_cfg: SandboxConfig | None, timeout_s: float) -> str | None:
    from harnessrl.harness.base import RunDirs, RunRequest, launch
    from harnessrl.sandbox import SandboxConfig, make_sandbox

    problem = adapter.preflight()
    if problem:
        return problem
    cfg = sandbox_cfg or SandboxConfig()
    memory = max(cfg.memory_mb, adapter.memory_floor_mb() or 0) if cfg.memory_mb else None  # its floor, as in rollouts
    cfg = cfg.model_copy(update={"extra_ro_binds": [*cfg.extra_ro_binds, *map(str, adapter.ro_paths())],
                                 "memory_mb": memory})
    with tempfile.TemporaryDirectory(prefix="openclaw-warm-") as tmp:
        src = Path(tmp) / "ws"
        src.mkdir()
        try:
            sb = make_sandbox(cfg, workspace_src=src)
        except Exception as e:  # noqa: BLE001 - no sandbox here: run without the cache
            return f"no sandbox for the warm-up: {e}"
        with sb:
            inner = sb.inner_workspace
            req = RunRequest("Reply with OK.", f"http://127.0.0.1:{STUB_PORT}", "warm", "warm", timeout_s, 1, inner,
                             RunDirs.fresh())
            spec = adapter.build(req)
            stub = req.dirs.sub("warm_stub.py")
            env = {k: v for k, v in spec.env.items() if k != "NODE_DISABLE_COMPILE_CACHE"}
            env |= {"NODE_COMPILE_CACHE": f"{inner}/.ncc", "OPENCLAW_PACKAGED_COMPILE_CACHE_RESPAWNED": "1"}
            spec = replace(spec, argv=[sys.executable, stub, str(STUB_PORT), "--", *spec.argv], env=env,
                           files={**spec.files, stub: STUB})
            outcome = launch(sb, spec, timeout_s)
            produced = Path(sb.workspace) / ".ncc"
            subdirs = [d for d in produced.iterdir() if d.is_dir()] if produced.is_dir() else []
            if outcome.status != "ok" or len(subdirs) != 1:
                return (f"openclaw warm-up run failed ({outcome.status}, {outcome.error or 'no cache written'}): "
                        f"{outcome.stderr[-300:]}")
            _install(subdirs[0], target)
            return None


def _install(produced: Path, target: Path) -> None:
    """Copy the warm-up's cache subdir into `target`, also under the host uid's name; publish atomically."""
    stage = Path(tempfile.mkdtemp(prefix=".ncc-", dir=target.parent))
    try:
        base = produced.name.rsplit("-", 1)[0]  # v<node>-<arch>-<hash>
        names = {produced.name, f"{base}-{os.getuid()}", f"{base}-1000"}
        for name in names:
            shutil.copytree(produced, stage / name)
        for root, dirs, files in os.walk(stage):
            os.chmod(root, 0o755)
            for f in files:
                os.chmod(os.path.join(root, f), 0o644)
        (stage / MARKER).write_text(f"warm-up entries: {sum(1 for _ in produced.iterdir())}\n")
        if target.exists():
            shutil.rmtree(target)
        os.replace(stage, target)
    finally:
        if stage.exists():
            shutil.rmtree(stage, ignore_errors=True)
    return None
