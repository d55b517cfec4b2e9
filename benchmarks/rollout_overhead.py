"""Non-model CPU per rollout, by component: a real harness in bwrap against the real proxy with a
scripted zero-cost policy, one rollout at a time (concurrency 1), the demo's serving (its tool format
and max tokens) and its task families.

    nice -n 10 .venv/bin/python benchmarks/rollout_overhead.py [--harness claude-code:tiny codex:small]
        [--rollouts 32] [--policy solve|fixed] [--config configs/demo.yaml]

`solve` (default) answers with the task's reference solution in one ```bash block, then "Done."
(2 calls: the harness runs one command, as in the demo); `fixed` gives one fixed text reply (1 call,
no command: `harnessrl rollout --engine scripted`). With one rollout at a time, CPU read around each
stage of the runner (getrusage of this process and of its reaped children) is that stage's own:

- sandbox: opening the task's sandbox (bwrap, its entry helper, the workspace copy-in);
- harness: the harness run (launcher + the harness's process tree + the commands it ran), of which
  `harness tree` is what the launcher reports for the harness's own process tree;
- verifier: the verifier's fresh sandbox, the workspace copy and the check;
- teardown: ending the agent's sandbox;
- run process: every thread of this process over the batch (proxy, runner, scripted engine).

Prints one row per harness: wall s and CPU s per rollout, by component, and the statuses.
"""

from __future__ import annotations

import argparse
import contextlib
import resource
import statistics
import sys
import tempfile
import time
import warnings
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Iterator

COMPONENTS = ("sandbox", "harness", "verifier", "teardown")


def cpu() -> tuple[float, float]:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


class Meter:
    """Children's CPU per runner stage (valid at concurrency 1: each stage reaps what it started)."""

    def __init__(self) -> None:
        self.children: dict[str, float] = defaultdict(float)

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        _, k0 = cpu()
        try:
            yield
        finally:
            self.children[name] += cpu()[1] - k0


def instrument(meter: Meter) -> None:
    """Wrap the runner's stages (rollout/jobs.py) in `meter` (this process only)."""
    from harnessrl.rollout import jobs

    open_sb, harness_run, verifier = jobs.open_task_sandbox, jobs._harness_run, jobs.run_verifier

    def opened(*a: Any, **kw: Any) -> Any:
        with meter.stage("sandbox"):
            sb = open_sb(*a, **kw)
        exit_ = type(sb).__exit__

        class Timed(type(sb)):  # type: ignore[misc, valid-type]
            def __exit__(self, *exc: Any) -> Any:
                with meter.stage("teardown"):
                    return exit_(self, *exc)

        sb.__class__ = Timed
        return sb

    def ran(*a: Any, **kw: Any) -> Any:
        with meter.stage("harness"):
            return harness_run(*a, **kw)

    def verified(*a: Any, **kw: Any) -> Any:
        with meter.stage("verifier"):
            return verifier(*a, **kw)

    jobs.open_task_sandbox, jobs._harness_run, jobs.run_verifier = opened, ran, verified


def solve_engine(renderer: Any, tasks: list) -> Any:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from harnessrl.engine.scripted import ScriptedEngine

    plans = {t.instruction: " && ".join(t.reference_solution) for t in tasks}

    def reply(prompt_ids: list[int]) -> list[int]:
        prompt = renderer.decode(prompt_ids)
        instruction = next((i for i in plans if i in prompt), None)
        after = prompt[prompt.rindex(instruction):] if instruction else ""
        text = "Done." if instruction is None or "```bash" in after else f"```bash\n{plans[instruction]}\n```"
        return renderer.encode(text) + [renderer.eot_id]

    return ScriptedEngine(reply, eos_ids=renderer.stop_ids)


def fixed_engine(renderer: Any) -> Any:
    from harnessrl.engine.scripted import ScriptedEngine

    reply = list(renderer.encode("Hello from the scripted engine.")) + [renderer.eot_id]
    return ScriptedEngine(lambda prompt_ids: reply, eos_ids=renderer.stop_ids)


def bench(spec: str, args: argparse.Namespace, cfg: Any, tasks: list, renderer: Any) -> dict[str, Any]:
    from harnessrl.rollout.jobs import run_groups
    from harnessrl.launch import start_proxy
    from harnessrl.sandbox import SandboxConfig
    from harnessrl.store import RunStore

    engine = solve_engine(renderer, tasks) if args.policy == "solve" else fixed_engine(renderer)
    store = RunStore(tempfile.mkdtemp(prefix="bench-overhead-"))
    server = start_proxy(cfg, engine, store, renderer)
    meter = Meter()
    instrument(meter)
    sandbox_cfg = SandboxConfig(type=cfg.sandbox.type, host_uid=cfg.sandbox.host_uid)  # as the training loop's
    options = {h.name: h.options for h in cfg.harnesses if getattr(h, "options", None)}
    try:
        run_groups(tasks[:1], [spec], 1, proxy=server, store=store, sandbox_cfg=sandbox_cfg, concurrency=1,
                   max_turns=cfg.loop.max_turns, step=0, progress=False, harness_options=options)  # warm-up
        meter.children.clear()
        chosen = [tasks[i % len(tasks)] for i in range(args.rollouts)]
        (s0, k0), t0 = cpu(), time.monotonic()
        records = run_groups(chosen, [spec], 1, proxy=server, store=store, sandbox_cfg=sandbox_cfg, concurrency=1,
                             max_turns=cfg.loop.max_turns, step=1, progress=False, harness_options=options)
        wall, (s1, k1) = time.monotonic() - t0, cpu()
    finally:
        server.stop()
        store.close()
    n = len(records)
    trees = [r.meta.get("harness_meta", {}).get("cpu_s", {}) for r in records]
    tree = sum(float(c.get("harness_user_s", 0)) + float(c.get("harness_system_s", 0)) for c in trees)
    return {"spec": spec, "n": n, "wall": wall / n, "total": (s1 - s0 + k1 - k0) / n, "run": (s1 - s0) / n,
            **{c: meter.children[c] / n for c in COMPONENTS}, "tree": tree / n,
            "calls": statistics.mean(r.call_count for r in records),
            "passed": sum(r.reward == 1.0 for r in records),
            "statuses": dict(Counter(r.status for r in records))}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--harness", nargs="+", default=["claude-code:tiny", "codex:small"])
    p.add_argument("--rollouts", type=int, default=32)
    p.add_argument("--policy", choices=("solve", "fixed"), default="solve")
    p.add_argument("--config", default="configs/demo.yaml")
    p.add_argument("--tasks", default="builtin:train")
    args = p.parse_args()
    warnings.simplefilter("ignore")

    from harnessrl.engine.model import smollm2_tokenizer_dir
    from harnessrl.render.renderer import Renderer
    from harnessrl.config import load_config
    from harnessrl.tasks import load_tasks

    cfg = load_config(args.config)
    families = set(cfg.tasks.families or [])
    tasks = [t for t in load_tasks(args.tasks) if not families or t.family in families]
    renderer = Renderer.from_pretrained(smollm2_tokenizer_dir(), tool_format=cfg.render.tool_format)
    print(f"policy={args.policy} tool_format={cfg.render.tool_format} rollouts={args.rollouts} concurrency=1")
    cols = ("wall", "total", "run", *COMPONENTS, "tree")
    print(f"{'harness':<18}" + "".join(f"{c:>10}" for c in cols) + f"{'calls':>7}{'passed':>8}  statuses")
    for spec in args.harness:
        row = bench(spec, args, cfg, tasks, renderer)
        print(f"{spec:<18}" + "".join(f"{row[c]:>10.3f}" for c in cols)
              + f"{row['calls']:>7.1f}{row['passed']:>8}  {row['statuses']}", flush=True)


if __name__ == "__main__":
    main()
