"""Cost per rollout of the white-box AgentLoop against harnesses through the proxy.

    .venv/bin/python benchmarks/whitebox_overhead.py [--harness whitebox builtin claude-code:tiny codex:small] [--runs 5]

Each rollout runs in an open bwrap sandbox (its start-up is the same for every harness and not
counted: docs/benchmarks.md "Sandbox start-up") against a scripted zero-latency policy: one
```bash block (or the harness's own shell tool call) writing a file, then a final answer, so what
is measured is the agent loop's own cost. Per harness: median wall seconds per rollout, and median
CPU seconds split into this process (proxy: HTTP, JSON, rendering; white box: rendering and the
loop) and the sandbox's processes (the harness process, its runtime, the commands), from
getrusage. "where" names the biggest parts: the rendering and engine seconds the records hold,
the commands (white box), the harness process (the rest of the sandbox's CPU).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

DEFAULT = ["whitebox", "builtin", "claude-code:tiny", "codex:small"]
TOOL_CALL = {"claude-code": ("Bash", {"command": "echo hello > hello.txt", "description": "write"}),
             "codex": ("exec_command", {"cmd": "echo hello > hello.txt"})}


def policy_for(name: str, renderer):
    """First the command, then (once an answer to it is in the prompt) "Done."."""
    from harnessrl.render.messages import ToolCall
    from harnessrl.render.tool_formats import render_calls

    tok, stop = renderer.tokenizer, renderer.stop_ids[0]
    first = "```bash\necho hello > hello.txt\n```"
    if name in TOOL_CALL and renderer.info.tool_format not in ("bash", "bash_examples"):
        tool, args = TOOL_CALL[name]
        first = render_calls([ToolCall("call_1", tool, args)], renderer.info.tool_format)
    command = "echo hello > hello.txt"

    def policy(prompt_ids: list[int]) -> list[int]:
        answered = command in tok.decode(prompt_ids)  # our command is in the history: it ran
        return tok.encode("Done." if answered else first, add_special_tokens=False) + [stop]

    return policy


def _cpu(who: int) -> float:
    ru = resource.getrusage(who)
    return ru.ru_utime + ru.ru_stime


def bench(spec: str, runs: int, model_dir: Path) -> dict:
    from harnessrl.engine.scripted import ScriptedEngine
    from harnessrl.harness import make_harness
    from harnessrl.proxy.server import ProxyServer
    from harnessrl.proxy.serving import ServingPolicy
    from harnessrl.render.renderer import Renderer
    from harnessrl.rollout.proxy_link import LocalProxy
    from harnessrl.sandbox import ProxyEndpoint, SandboxConfig, make_sandbox
    from harnessrl.store import RunStore

    name = spec.split(":")[0]
    adapter = make_harness(spec)
    if getattr(adapter, "preflight", lambda: None)():
        return {"harness": spec, "skipped": adapter.preflight()}
    fmt = "bash_examples" if name in TOOL_CALL else None  # what the shipped configs serve them with
    renderer = Renderer.from_pretrained(model_dir, tool_format=fmt)
    engine = ScriptedEngine(policy_for(name, renderer), max_model_len=131072, model_path=str(model_dir))
    tmp = Path(tempfile.mkdtemp(prefix="whitebox-bench-"))
    store = RunStore(tmp / "run")
    server = ProxyServer(engine, store, renderer, policy=ServingPolicy(max_tokens_cap=256)).start()
    if hasattr(adapter, "bind_proxy"):
        adapter.bind_proxy(LocalProxy(server))
    cfg = SandboxConfig(type="bwrap", extra_ro_binds=[str(p) for p in adapter.ro_paths()])
    (tmp / "ws").mkdir()
    rows: list[dict] = []
    try:
        for i in range(runs):
            rid = f"{name}-{i}"
            key = server.register_rollout(rid)
            with make_sandbox(cfg, workspace_src=tmp / "ws", proxy=ProxyEndpoint(server.port, key=key)) as sb:
                t0, self0, kids0 = time.monotonic(), _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
                res = adapter.run(sb, instruction="Write hello into hello.txt.", proxy_base=f"{sb.proxy_base}/r/{key}",
                                  api_key=key, model="policy", timeout_s=600, max_turns=6)
                wall = time.monotonic() - t0
                self_cpu, kids_cpu = _cpu(resource.RUSAGE_SELF) - self0, _cpu(resource.RUSAGE_CHILDREN) - kids0
            server.close_rollout(key)
            calls = store.list_calls([rid])
            timings = [c.meta.get("timings") or {k: c.meta.get(k, 0.0) for k in ("render_s", "engine_s")}
                       for c in calls]
            rows.append({"wall": wall, "self": self_cpu, "kids": kids_cpu, "status": res.status, "calls": len(calls),
                         "render": sum(float(t.get("render_s", 0.0)) for t in timings),
                         "engine": sum(float(t.get("engine_s", 0.0)) for t in timings),
                         "command": float(res.meta.get("command_s", 0.0))})
    finally:
        server.stop()
        store.close()

    def med(k: str) -> float:
        return statistics.median(r[k] for r in rows)

    return {"harness": spec, "wall": med("wall"), "self": med("self"), "kids": med("kids"), "calls": med("calls"),
            "render": med("render"), "engine": med("engine"), "command": med("command"),
            "statuses": [r["status"] for r in rows]}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--harness", nargs="*", default=DEFAULT)
    p.add_argument("--runs", type=int, default=5)
    args = p.parse_args()
    from harnessrl.engine.model import resolve_model

    model_dir = Path(resolve_model(None))
    print("| harness | wall s/rollout | CPU s: run process | CPU s: sandbox | calls | render s | engine s "
          f"| commands s | statuses ({args.runs} runs) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for spec in args.harness:
        r = bench(spec, args.runs, model_dir)
        if "skipped" in r:
            print(f"| {spec} | skipped: {r['skipped']} |||||||")
            continue
        print(f"| {r['harness']} | {r['wall']:.2f} | {r['self']:.2f} | {r['kids']:.2f} | {r['calls']:.0f} "
              f"| {r['render']:.3f} | {r['engine']:.3f} | {r['command']:.2f} | {', '.join(r['statuses'])} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
