"""First-prompt size of each harness profile: the real harness binaries against the proxy with the
engine of `harnessrl serve --engine scripted` (every call answered with one fixed sentence, so each
rollout is one call), in a local sandbox. The size is the number of prompt tokens the proxy rendered
for the first call (default tokenizer, SmolLM2's chat template, the renderer's tool format).

    .venv/bin/python benchmarks/harness_prompt_size.py [--harness claude-code:small codex:small ...]
        [--tool-format FORMAT] [--json]

Prints one markdown row per spec: first-prompt tokens, tools offered, system/instruction chars,
status. `--tool-format` picks the renderer's tool format (default: the model's own).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

DEFAULT = ["claude-code:full", "claude-code:small", "claude-code:tiny", "codex:full", "codex:small",
           "openclaw:full", "openclaw:small", "openclaw:gateway", "mini-swe-agent:tool", "mini-swe-agent:text",
           "builtin"]


def _tools_and_system(request: dict[str, Any]) -> tuple[list[str], int]:
    tools = [t.get("name") or (t.get("function") or {}).get("name") or t.get("type")
             for t in request.get("tools") or []]
    system = request.get("system") or request.get("instructions") or ""
    chars = len(json.dumps(system)) if not isinstance(system, str) else len(system)
    for m in request.get("messages") or request.get("input") or []:
        if isinstance(m, dict) and m.get("role") in ("system", "developer"):
            chars += len(json.dumps(m.get("content")))
    return tools, chars


def measure(spec: str, renderer: Any, model_dir: Path, tool_format: str | None, timeout_s: float,
            dump: Path | None = None) -> dict:
    from harnessrl.harness import make_harness
    from harnessrl.app.serve import build_engine
    from harnessrl.proxy.server import ProxyServer
    from harnessrl.sandbox import ProxyEndpoint, SandboxConfig, make_sandbox
    from harnessrl.store import RunStore

    adapter = make_harness(spec)
    engine = build_engine("scripted", model_dir, 1 << 17, renderer)
    tmp = Path(tempfile.mkdtemp(prefix="prompt-size-"))
    store = RunStore(tmp / "run")
    server = ProxyServer(engine, store, renderer).start()
    (tmp / "ws").mkdir()
    try:
        key = server.register_rollout("r0")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sb = make_sandbox(SandboxConfig(type="local"), workspace_src=tmp / "ws", proxy=ProxyEndpoint(server.port, key=key))
        with sb:
            res = adapter.run(sb, instruction="Write the word hello into the file hello.txt.",
                              proxy_base=f"{sb.proxy_base}/r/{key}", api_key=key, model="policy",
                              timeout_s=timeout_s, max_turns=2)
        calls = sorted(store.list_calls(["r0"], include_raw=True), key=lambda c: c.seq)
    finally:
        server.stop()
        store.close()
    first = calls[0] if calls else None
    if dump is not None and first is not None:
        dump.mkdir(parents=True, exist_ok=True)
        (dump / f"{spec.replace(':', '_')}.json").write_text(json.dumps(first.request, indent=1))
        (dump / f"{spec.replace(':', '_')}.prompt.txt").write_text(renderer.tokenizer.decode(first.prompt_ids))
    tools, system_chars = _tools_and_system(first.request or {}) if first else ([], 0)
    return {"spec": spec, "tool_format": tool_format or renderer.info.tool_format,
            "prompt_tokens": len(first.prompt_ids) if first else None, "tools": tools,
            "system_chars": system_chars, "status": res.status, "calls": len(calls),
            "error": res.error[:200]}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--harness", nargs="*", default=DEFAULT)
    p.add_argument("--tool-format", default=None, help="renderer tool format (default: the model's)")
    p.add_argument("--timeout", type=float, default=300)
    p.add_argument("--json", action="store_true")
    p.add_argument("--dump", type=Path, default=None, help="write each first request and rendered prompt here")
    args = p.parse_args()
    from harnessrl.engine.model import smollm2_tokenizer_dir
    from harnessrl.render.renderer import Renderer

    model_dir = smollm2_tokenizer_dir()
    kw = {"tool_format": args.tool_format} if args.tool_format else {}
    renderer = Renderer.from_pretrained(model_dir, **kw)
    if not args.json:
        print("| spec | tool format | first prompt, tokens | tools | system chars | status |")
        print("|---|---|---:|---|---:|---|")
    for spec in args.harness:
        r = measure(spec, renderer, model_dir, args.tool_format, args.timeout, args.dump)
        if args.json:
            print(json.dumps(r), flush=True)
        else:
            print(f"| `{r['spec']}` | {r['tool_format']} | {r['prompt_tokens']} | {len(r['tools'])}: "
                  f"{', '.join(map(str, r['tools']))} | {r['system_chars']} | {r['status']} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
