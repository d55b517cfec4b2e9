"""Sandbox start-up overhead: create+destroy (and create+run `true`+destroy) per backend.

    .venv/bin/python benchmarks/sandbox_startup.py [--n 50]

Prints median and p90 in milliseconds next to a plain `subprocess.run(["true"])`, the floor for
anything that starts a process. Target: bwrap create+destroy <= 50 ms (median).
"""

from __future__ import annotations

import argparse
import resource
import socket
import statistics
import subprocess
import time
import warnings
from collections.abc import Callable

from harnessrl.sandbox import ProxyEndpoint, SandboxConfig, make_sandbox


def _cpu_s() -> float:
    """CPU seconds of this process plus its waited-for descendants (user + system)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _timed(cases: dict[str, Callable[[], None]], n: int) -> dict[str, tuple[list[float], list[float]]]:
    """Wall and CPU ms per call. Round-robin over the cases so that load changes on a shared
    machine hit all alike; CPU time is the figure that load inflates least."""
    for fn in cases.values():
        fn()  # warm-up (imports, page cache, the cached /etc)
    out: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in cases}
    for _ in range(n):
        for name, fn in cases.items():
            t0, c0 = time.perf_counter(), _cpu_s()
            fn()
            out[name][0].append((time.perf_counter() - t0) * 1000)
            out[name][1].append((_cpu_s() - c0) * 1000)
    return out


def _p90(xs: list[float]) -> float:
    return sorted(xs)[min(len(xs) - 1, round(0.9 * (len(xs) - 1)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=50, help="repetitions per case")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    listener = socket.socket()  # stands in for the proxy: the bridge only needs its port
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    proxy = ProxyEndpoint(port=listener.getsockname()[1])
    bwrap, local = SandboxConfig(type="bwrap"), SandboxConfig(type="local")

    def create_destroy(cfg: SandboxConfig, with_proxy: bool = False) -> Callable[[], None]:
        return lambda: make_sandbox(cfg, proxy=proxy if with_proxy else None).destroy()

    def create_run_destroy(cfg: SandboxConfig) -> Callable[[], None]:
        def go() -> None:
            with make_sandbox(cfg) as sb:
                assert sb.run(["true"]).ok

        return go

    cases = {
        "subprocess.run(['true'])": lambda: subprocess.run(["true"], check=True),
        "bwrap create+destroy": create_destroy(bwrap),
        "bwrap create+destroy, proxy bridged": create_destroy(bwrap, with_proxy=True),
        "bwrap create+run(true)+destroy": create_run_destroy(bwrap),
        "local create+destroy": create_destroy(local),
        "local create+run(true)+destroy": create_run_destroy(local),
    }
    print(f"{'case':40s} {'wall median ms':>14s} {'wall p90 ms':>11s} {'cpu median ms':>13s}   (n={args.n})")
    for name, (wall, cpu) in _timed(cases, args.n).items():
        print(f"{name:40s} {statistics.median(wall):14.1f} {_p90(wall):11.1f} {statistics.median(cpu):13.1f}")
    listener.close()


if __name__ == "__main__":
    main()
