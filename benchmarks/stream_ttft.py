"""Time to first token of a streamed answer against the total time of the same answer unstreamed.

The proxy (ProxyServer, real SmolLM2 renderer, real RunStore) serves one engine; a client sends
the same greedy request streamed and unstreamed, alternating, `--reps` times per protocol, and
measures on its side: the streamed answer's first content delta (TTFT), its last byte, and the
unstreamed answer's total. Greedy sampling, so both forms produce the same tokens.

    .venv/bin/python benchmarks/stream_ttft.py                      # HFEngine, the default model
    .venv/bin/python benchmarks/stream_ttft.py --engine scripted --token-delay-s 0.05

`--engine scripted` replies with a fixed text, one token every `--token-delay-s` (an artificial
decode time), for a machine where the model is too slow.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import httpx

PROMPT = "Explain in two sentences why the sky is blue."
SCRIPTED_REPLY = ("The sky looks blue because air molecules scatter short blue wavelengths of sunlight far more "
                  "than long red ones, so blue light reaches our eyes from every direction of the sky.")


def _chat_text(ev: dict[str, Any]) -> str:
    return "".join(c["delta"].get("content") or "" for c in ev.get("choices") or [])


def _anthropic_text(ev: dict[str, Any]) -> str:
    return ev["delta"].get("text", "") if ev.get("type") == "content_block_delta" else ""


def _responses_text(ev: dict[str, Any]) -> str:
    return ev["delta"] if ev.get("type") == "response.output_text.delta" else ""


def _gemini_text(ev: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for c in ev.get("candidates") or [] for p in c["content"]["parts"])


# protocol -> (path under the rollout's root, request body, streamed body changes, text of one event)
PROTOCOLS: dict[str, tuple[str, dict[str, Any], dict[str, Any], Callable[[dict[str, Any]], str]]] = {
    "openai.chat": ("/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": PROMPT}]},
                    {"stream": True}, _chat_text),
    "anthropic": ("/v1/messages", {"model": "m", "messages": [{"role": "user", "content": PROMPT}]},
                  {"stream": True}, _anthropic_text),
    "openai.responses": ("/v1/responses", {"model": "m", "input": PROMPT}, {"stream": True}, _responses_text),
    "gemini": ("/v1beta/models/m:generateContent", {"contents": [{"role": "user", "parts": [{"text": PROMPT}]}]},
               {}, _gemini_text),
}


def _body(protocol: str, base: dict[str, Any], max_tokens: int) -> dict[str, Any]:
    if protocol == "gemini":
        return {**base, "generationConfig": {"temperature": 0, "maxOutputTokens": max_tokens}}
    key = "max_output_tokens" if protocol == "openai.responses" else "max_tokens"
    return {**base, "temperature": 0, key: max_tokens}


def streamed(http: httpx.Client, url: str, body: dict[str, Any], text_of: Callable[[dict[str, Any]], str]) -> dict:
    """(seconds to the first content delta, seconds to the last byte, content deltas, text)."""
    t0 = time.perf_counter()
    first, pieces = None, []
    with http.stream("POST", url, json=body) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith("data:") or line.strip() == "data: [DONE]":
                continue
            piece = text_of(json.loads(line[len("data:"):]))
            if piece:
                first = first if first is not None else time.perf_counter() - t0
                pieces.append(piece)
    return {"ttft_s": first, "total_s": time.perf_counter() - t0, "deltas": len(pieces), "text": "".join(pieces)}


def unstreamed(http: httpx.Client, url: str, body: dict[str, Any]) -> float:
    t0 = time.perf_counter()
    http.post(url, json=body).raise_for_status()
    return time.perf_counter() - t0


def make_engine(args: argparse.Namespace, renderer: Any) -> Any:
    if args.engine == "scripted":
        from harnessrl.engine.scripted import ScriptedEngine

        reply = list(renderer.encode(SCRIPTED_REPLY)) + [renderer.eot_id]
        return ScriptedEngine(lambda _: reply, eos_ids=[renderer.eot_id], token_delay_s=args.token_delay_s)
    from harnessrl.engine.hf import HFEngine
    from harnessrl.engine.model import resolve_model

    return HFEngine(str(resolve_model(None)), max_model_len=2048)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", choices=["hf", "scripted"], default="hf")
    ap.add_argument("--token-delay-s", type=float, default=0.05, help="scripted: seconds per token")
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--protocols", nargs="+", choices=list(PROTOCOLS), default=list(PROTOCOLS))
    args = ap.parse_args()

    from harnessrl.engine.model import resolve_model
    from harnessrl.proxy.server import ProxyServer
    from harnessrl.render.renderer import Renderer
    from harnessrl.store import RunStore

    renderer = Renderer.from_pretrained(str(resolve_model(None)))
    engine = make_engine(args, renderer)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        store = RunStore(Path(tmp) / "run")
        with ProxyServer(engine, store, renderer) as server, httpx.Client(timeout=600) as http:
            for protocol in args.protocols:
                path, base, stream_fields, text_of = PROTOCOLS[protocol]
                body = _body(protocol, base, args.max_tokens)
                root = server.base_urls(server.register_rollout(f"bench-{protocol}"))["openai"][:-len("/v1")]
                stream_path = path.replace(":generateContent", ":streamGenerateContent?alt=sse")
                unstreamed(http, root + path, body)  # warm-up (prefix caches, first-call costs)
                for _ in range(args.reps):
                    s = streamed(http, root + stream_path, {**body, **stream_fields}, text_of)
                    rows.append({"protocol": protocol, **s, "whole_s": unstreamed(http, root + path, body)})
        store.close()
    engine.close()
    print(f"engine={args.engine}" + (f" token_delay_s={args.token_delay_s}" if args.engine == "scripted" else "")
          + f" max_tokens={args.max_tokens} reps={args.reps}")
    print(f"{'protocol':18} {'deltas':>6} {'TTFT s':>8} {'stream total s':>15} {'unstreamed s':>13} {'TTFT/unstreamed':>16}")
    for protocol in args.protocols:
        mine = [r for r in rows if r["protocol"] == protocol]
        ttft = statistics.median(r["ttft_s"] for r in mine)
        total = statistics.median(r["total_s"] for r in mine)
        whole = statistics.median(r["whole_s"] for r in mine)
        deltas = min(r["deltas"] for r in mine)
        print(f"{protocol:18} {deltas:>6} {ttft:>8.3f} {total:>15.3f} {whole:>13.3f} {ttft / whole:>16.3f}")


if __name__ == "__main__":
    main()
