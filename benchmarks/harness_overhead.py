"""Harness overhead per rollout: each real harness inside bwrap against the real proxy, with a scripted
zero-latency policy (one tool call that writes a file, then a final answer), so the wall time is the
harness's own cost (start-up, prompt building, tool execution) plus proxy + rendering.

    .venv/bin/python benchmarks/harness_overhead.py [--harness builtin codex ...] [--runs 3]

Prints one row per harness: median / min wall seconds per rollout, median CPU seconds per rollout
(user + system of the whole sandboxed process tree, from getrusage: robust on a shared box where wall
time mostly measures waiting for a core), calls per rollout, prompt tokens of the first call, and the
status of every run.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

DEFAULT = ["builtin", "mini-swe-agent", "claude-code", "codex", "openclaw", "openclaw:gateway"]
FIRST = {  # the scripted first reply for each harness (tool name + args it understands)
    "claude-code": ("Bash", {"command": "echo hello > hello.txt", "description": "write"}),
    "codex": ("exec_command", {"cmd": "echo hello > hello.txt"}),
    "openclaw": ("exec", {"command": "echo hello > hello.txt"}),
}
ANSWERED = {"mini-swe-agent": "<returncode>", "builtin": "Exit code"}


def policy_for(name: str, renderer):
    from harnessrl.render.messages import ToolCall
    from harnessrl.render.tool_formats import render_calls

    tok, stop = renderer.tokenizer, renderer.stop_ids[0]
    if name in FIRST:
        tool, args = FIRST[name]
        first = render_calls([ToolCall("call_1", tool, args)], renderer.info.tool_format)
    else:
        first = "```bash\necho hello > hello.txt\n```"
    submit = "```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"
    final = submit if name == "mini-swe-agent" else "Done."
    marker = ANSWERED.get(name, "<tool_response>")

    def policy(prompt_ids: list[int]) -> list[int]:
        text = tok.decode(prompt_ids[-1500:])
        # OpenClaw ends every request with a user message of its own (internal context) after the
        # tool result: look at everything since the last assistant turn
        if name == "openclaw":
            last_user = text[:text.rfind("<|im_start|>assistant")].rsplit("<|im_start|>assistant", 1)[-1]
        else:
            last_user = text.rsplit("<|im_start|>user", 1)[-1]
        text = final if marker in last_user else first
        return tok.encode(text, add_special_tokens=False) + [stop]

    return policy


def bench(spec: str, runs: int, renderer, model_dir: Path) -> dict:
    from harnessrl.engine.scripted import ScriptedEngine
    from harnessrl.harness import make_harness
    from harnessrl.proxy.server import ProxyServer
    from harnessrl.sandbox import ProxyEndpoint, SandboxConfig, make_sandbox
    from harnessrl.store import RunStore

    name = spec.split(":")[0]
    adapter = make_harness(spec)
    engine = ScriptedEngine(policy_for(name, renderer), max_model_len=131072, model_path=str(model_dir))
    tmp = Path(tempfile.mkdtemp(prefix="harness-bench-"))
    store = RunStore(tmp / "run")
    server = ProxyServer(engine, store, renderer).start()
    cfg = SandboxConfig(type="bwrap", extra_ro_binds=[str(p) for p in adapter.ro_paths()])
    (tmp / "ws").mkdir()
    walls, cpus, statuses, ncalls, first_prompt = [], [], [], [], 0
    try:
        for i in range(runs):
            rid = f"{name}-{i}"
            key = server.register_rollout(rid)
            with make_sandbox(cfg, workspace_src=tmp / "ws", proxy=ProxyEndpoint(server.port, key=key)) as sb:
                t0, ru0 = time.monotonic(), resource.getrusage(resource.RUSAGE_CHILDREN)
                res = adapter.run(sb, instruction="Write hello into hello.txt.",
                                  proxy_base=f"{sb.proxy_base}/r/{key}", api_key=key, model="policy",
                                  timeout_s=600, max_turns=6)
                walls.append(time.monotonic() - t0)
                ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpus.append(ru1.ru_utime - ru0.ru_utime + ru1.ru_stime - ru0.ru_stime)
            statuses.append(res.status)
            calls = store.list_calls([rid])
            ncalls.append(len(calls))
            first_prompt = len(min(calls, key=lambda c: c.seq).prompt_ids) if calls else 0
    finally:
        server.stop()
    return {"harness": spec, "median_s": statistics.median(walls), "min_s": min(walls),
            "cpu_s": statistics.median(cpus),
            "calls": statistics.median(ncalls), "prompt0": first_prompt, "statuses": statuses}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--harness", nargs="*", default=DEFAULT)
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args()
    from harnessrl.engine.model import resolve_model
    from harnessrl.render.renderer import Renderer

    model_dir = resolve_model(None)
    renderer = Renderer.from_pretrained(model_dir)
    print("| harness | wall s/rollout (median) | min | CPU s/rollout (median) | calls/rollout | first prompt tokens "
          f"| statuses ({args.runs} runs) |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for spec in args.harness:
        r = bench(spec, args.runs, renderer, model_dir)
        print(f"| {r['harness']} | {r['median_s']:.1f} | {r['min_s']:.1f} | {r['cpu_s']:.1f} | {r['calls']:.0f} "
              f"| {r['prompt0']} | {', '.join(r['statuses'])} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
