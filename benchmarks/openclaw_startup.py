"""OpenClaw start-up settings on/off in one run (issue 43 item 3): where an OpenClaw rollout's time
goes, and what each start-up setting of the adapter buys.

Rounds alternate the variants (so load from other work hits them alike); each round runs one
rollout per variant through the real runner (benchmarks/warm_pool.py: bwrap, the real proxy, a
scripted zero-latency policy, the verifier). A variant is the adapter's launch env with some of the
start-up settings removed:
- `before`: without OPENCLAW_NO_RESPAWN and OPENCLAW_DISABLE_BUNDLED_PLUGINS (the adapter until
  issue 43);
- `no-respawn`: only OPENCLAW_NO_RESPAWN;
- `after`: the adapter as shipped;
- `no-cache`: the adapter as shipped without its pre-warmed compile cache.
Prints per variant: median wall and CPU-s of the harness (user + system of the sandboxed tree),
model time, and statuses.

    .venv/bin/python benchmarks/openclaw_startup.py [--spec openclaw:small] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from harness_overhead import policy_for  # noqa: E402
from warm_pool import batch  # noqa: E402

KNOBS = ("OPENCLAW_NO_RESPAWN", "OPENCLAW_DISABLE_BUNDLED_PLUGINS")
VARIANTS = {"before": KNOBS, "no-respawn": ("OPENCLAW_DISABLE_BUNDLED_PLUGINS",), "after": (), "no-cache": ()}


def variant_adapter(spec: str, drop: tuple[str, ...], cache: bool):
    from harnessrl.harness import make_harness

    adapter = make_harness(spec, compile_cache=cache)
    build = adapter.build

    def patched(req):
        launch = build(req)
        return replace(launch, env={k: v for k, v in launch.env.items() if k not in drop})

    adapter.build = patched  # type: ignore[method-assign]
    return adapter


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--spec", default="openclaw:small")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--variants", nargs="*", default=list(VARIANTS))
    args = p.parse_args()
    from harnessrl.engine.model import resolve_model
    from harnessrl.engine.scripted import ScriptedEngine
    from harnessrl.proxy.server import ProxyServer
    from harnessrl.render.renderer import Renderer
    from harnessrl.store import RunStore

    model_dir = resolve_model(None)
    renderer = Renderer.from_pretrained(model_dir)
    engine = ScriptedEngine(policy_for("openclaw", renderer), max_model_len=131072, model_path=str(model_dir))
    store = RunStore(Path(tempfile.mkdtemp(prefix="openclaw-bench-")) / "run")
    server = ProxyServer(engine, store, renderer).start()
    adapters = {v: variant_adapter(args.spec, VARIANTS[v], v != "no-cache") for v in args.variants}
    for a in adapters.values():
        problem = a.preflight()
        if problem:
            print(f"cannot run {args.spec}: {problem}")
            return 1
    rows: dict[str, list[dict]] = {v: [] for v in args.variants}
    try:
        for rnd in range(args.rounds):
            order = args.variants if rnd % 2 == 0 else list(reversed(args.variants))
            for v in order:
                res = batch(args.spec, adapters[v], server, store, 1, 1, 0, rnd * 10 + args.variants.index(v))
                rows[v].extend(res["rows"])
    finally:
        server.stop()
    print(f"{args.spec}, {args.rounds} rounds, one rollout per variant per round (medians)")
    print("| variant | wall s (harness) | CPU s (harness) | model s | calls | statuses |")
    print("|---|---:|---:|---:|---:|---|")
    for v, rs in rows.items():
        med = lambda k: statistics.median(r[k] for r in rs)  # noqa: E731
        print(f"| {v} | {med('harness'):.1f} | {med('cpu'):.2f} | {med('model'):.3f} | {med('calls'):.0f} "
              f"| {', '.join(sorted({r['status'] for r in rs}))} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
