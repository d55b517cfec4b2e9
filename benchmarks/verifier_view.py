"""What scoring out of the agent's reach costs: the verifier in a fresh sandbox vs in place.

    .venv/bin/python benchmarks/verifier_view.py [--n 20] [--big-mb 20]

"in place" is how rollouts were scored before: the verifier's files copied into the agent's own
sandbox and run there (the agent could plant modules beside them). "fresh view" is
tasks/verifier.py now: the workspace copied out (tar, as the sandbox user), a new sandbox, the
verifier's files bound read-only. Also the pre-batch host check (sandbox/health.py: preflight).
Prints median and p90 wall ms and median CPU ms (this process and its children), round-robin.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from harnessrl.sandbox import SandboxConfig, make_sandbox
from harnessrl.sandbox.health import preflight
from harnessrl.tasks.files import write_tree
from harnessrl.tasks.model import Task, Verifier
from harnessrl.tasks.verifier import run_verifier

VERIFY = b"import json, pathlib\nprint(json.dumps({'out': float(pathlib.Path('out.txt').is_file())}))\n"


def _cpu_s() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _task(files: dict[str, bytes]) -> Task:
    return Task(id="bench", instruction="-", files=files,
                verifier=Verifier("checks", "python3 .verifier/verify.py", files={"verify.py": VERIFY}))


def _in_place(task: Task, cfg: SandboxConfig) -> Callable[[], None]:
    def run() -> None:
        with tempfile.TemporaryDirectory() as ws, tempfile.TemporaryDirectory() as vd:
            write_tree(Path(ws), task.files)
            write_tree(Path(vd), task.verifier.files)
            with make_sandbox(cfg, workspace_src=ws) as sb:
                sb.copy_in(vd, ".verifier")
                assert sb.run(["python3", ".verifier/verify.py"]).ok
    return run


def _fresh_view(task: Task, cfg: SandboxConfig) -> Callable[[], None]:
    def run() -> None:
        with tempfile.TemporaryDirectory() as ws:
            write_tree(Path(ws), task.files)
            with make_sandbox(cfg, workspace_src=ws) as sb:
                assert run_verifier(task, sb).status == "ok"
    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--big-mb", type=int, default=20)
    args = ap.parse_args()
    cfg = SandboxConfig()
    small = _task({f"f{i}.txt": b"x" * 100 for i in range(10)})
    big = _task({"data.bin": b"\0" * (args.big_mb << 20), "out.txt": b"ok\n"})
    cases: dict[str, Callable[[], None]] = {
        "small workspace: in place (before)": _in_place(small, cfg),
        "small workspace: fresh view (now)": _fresh_view(small, cfg),
        f"{args.big_mb} MiB workspace: in place (before)": _in_place(big, cfg),
        f"{args.big_mb} MiB workspace: fresh view (now)": _fresh_view(big, cfg),
        "preflight (host devices + one sandbox)": lambda: preflight(cfg),
    }
    for fn in cases.values():
        fn()
    out: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in cases}
    for _ in range(args.n):
        for name, fn in cases.items():
            t0, c0 = time.perf_counter(), _cpu_s()
            fn()
            out[name][0].append((time.perf_counter() - t0) * 1000)
            out[name][1].append((_cpu_s() - c0) * 1000)
    print(f"n={args.n} per case (sandbox create + fill + score + destroy)")
    print("| case | wall median ms | wall p90 ms | cpu median ms |\n|---|---:|---:|---:|")
    for name, (wall, cpu) in out.items():
        p90 = statistics.quantiles(wall, n=10)[-1] if len(wall) > 1 else wall[0]
        print(f"| {name} | {statistics.median(wall):.1f} | {p90:.1f} | {statistics.median(cpu):.1f} |")


if __name__ == "__main__":
    main()
