"""What the host-side handling of a workspace costs: sandbox start-up, the copy out to the host,
and the verifier's copy (copy out + a fresh sandbox filled with it), for a normal workspace and
for 20,000 empty files (issue 25: 4.4 s of copy-out outside every timeout).

    nice -n 10 .venv/bin/python benchmarks/workspace_copy.py [--n 5] [--files 20000]

Run it against another checkout's code with PYTHONPATH=<that checkout>/src to compare. Prints
median wall and CPU ms (this process and its children) per case, round-robin over the cases.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

from harnessrl.sandbox import SandboxConfig, make_sandbox
from harnessrl.sandbox.views import fresh_view


def _cpu_s() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _filled(cfg: SandboxConfig, script: str):
    sb = make_sandbox(cfg)
    res = sb.run(["sh", "-c", script], timeout_s=300)
    if not res.ok:
        raise SystemExit(f"filling the workspace failed: {res.stderr}")
    return sb


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=5)
    ap.add_argument("--files", type=int, default=20000)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    cfg = SandboxConfig(type="bwrap")
    normal = _filled(cfg, "for i in $(seq 10); do head -c 2000 /dev/urandom > f$i.txt; done; mkdir -p src/pkg; "
                          "echo 'print(1)' > src/pkg/main.py")
    many = _filled(cfg, f"mkdir m && cd m && python3 -c \"[open(str(i), 'w').close() for i in range({args.files})]\"")

    def copy_out(sb) -> Callable[[], None]:
        def go() -> None:
            with tempfile.TemporaryDirectory() as tmp:
                sb.copy_out(sb.inner_workspace, Path(tmp) / "w")
        return go

    def view(sb) -> Callable[[], None]:
        return lambda: fresh_view(sb).destroy()

    cases: dict[str, Callable[[], None]] = {
        "sandbox create+destroy": lambda: make_sandbox(cfg).destroy(),
        "normal workspace: copy out": copy_out(normal),
        "normal workspace: verifier's copy (copy out + fresh sandbox)": view(normal),
        f"{args.files} empty files: copy out": copy_out(many),
        f"{args.files} empty files: verifier's copy (copy out + fresh sandbox)": view(many),
    }
    for fn in cases.values():
        fn()  # warm-up
    out: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in cases}
    for _ in range(args.n):
        for name, fn in cases.items():
            t0, c0 = time.perf_counter(), _cpu_s()
            fn()
            out[name][0].append((time.perf_counter() - t0) * 1000)
            out[name][1].append((_cpu_s() - c0) * 1000)
    normal.destroy()
    many.destroy()
    print(f"n={args.n} per case")
    print("| case | wall median ms | cpu median ms |\n|---|---:|---:|")
    for name, (wall, cpu) in out.items():
        print(f"| {name} | {statistics.median(wall):.0f} | {statistics.median(cpu):.0f} |")


if __name__ == "__main__":
    main()
