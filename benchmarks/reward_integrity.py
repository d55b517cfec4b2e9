"""What the reward-integrity defences of issue 39 cost on the verifier step (items 1, 2, 5).

    .venv/bin/python benchmarks/reward_integrity.py [--n 15] [--files 2000] [--links 200]

Each case scores one agent sandbox's workspace with `run_verifier` again and again, the defence on
and off in turn (round-robin, so load drifts hit both alike), and prints median / p90 wall ms and
the ratio of the medians:
- links, small: a native task, a few files and links (`vet_links` on the verifier's copy, and the
  copy-out's `safe_members` on the final tree, vs `check_links=False`);
- links, big: `--files` files in 20 directories and `--links` links among them;
- Harbor guard: Terminal-Bench's test.sh template running the agent's `sum.sh` on a busybox + bash
  image (tests/support/images.py; needs umoci, skopeo, busybox-static), GUARD_SH vs the unguarded
  verifier. Skipped when those tools are missing.
The `safe_members` part is in both arms of every case (it is not switchable); the unit figure for
it is printed last: safe_members over an archive of the big workspace, ms.
"""

from __future__ import annotations

import argparse
import io
import shlex
import statistics
import sys
import tarfile
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

from harnessrl.rollout.task_sandbox import open_task_sandbox
from harnessrl.sandbox import SandboxConfig
from harnessrl.sandbox.tarcopy import safe_members
from harnessrl.tasks.model import Task, Verifier
from harnessrl.tasks.verifier import run_verifier

BWRAP = SandboxConfig(type="bwrap")
VERIFY = b"import json, pathlib\nprint(json.dumps({'out': float(pathlib.Path('out.txt').is_file())}))\n"
TB_TEST_SH = """#!/bin/bash
out=$(bash /app/sum.sh 2 3 2>/dev/null)
test "$out" = 5
if [ $? -eq 0 ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""


def _native(n_files: int, n_links: int) -> tuple[Task, str]:
    files = {f"d{i % 20}/f{i}.txt": b"x" * 64 for i in range(n_files)}
    files["out.txt"] = b"ok\n"
    links = " && ".join(f"ln -s ../d{(i + 1) % 20}/f{(i + 1) % n_files}.txt d{i % 20}/l{i}" for i in range(n_links))
    task = Task(id="bench", instruction="-", files=files,
                verifier=Verifier("checks", "python3 .verifier/verify.py", files={"verify.py": VERIFY}))
    return task, links or "true"


def _time(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def _report(name: str, on: list[float], off: list[float]) -> None:
    def p90(xs: list[float]) -> float:
        return sorted(xs)[int(0.9 * (len(xs) - 1))]

    mon, moff = statistics.median(on), statistics.median(off)
    print(f"| {name} | {moff:.1f} | {p90(off):.1f} | {mon:.1f} | {p90(on):.1f} | {mon / moff:.3f} |", flush=True)


def bench_links(name: str, task: Task, setup: str, n: int) -> None:
    with open_task_sandbox(task, BWRAP) as sb:
        assert sb.run(["sh", "-c", setup], timeout_s=300).ok
        on, off = [], []
        for _ in range(n):
            res: list = []
            off.append(_time(lambda: res.append(run_verifier(task, sb, check_links=False))))
            on.append(_time(lambda: res.append(run_verifier(task, sb))))
            assert all(r.status == "ok" and r.reward == 1.0 for r in res), res
    _report(name, on, off)


def bench_harbor(n: int) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.support.images import build_images, tools_missing

    from harnessrl.tasks.harbor import load_harbor

    if tools_missing():
        print(f"| Harbor guard | skipped: {tools_missing()} missing | | | | |")
        return
    with tempfile.TemporaryDirectory() as tmp:
        images = build_images(Path(tmp) / "images")
        d = Path(tmp) / "sum"
        (d / "tests").mkdir(parents=True)
        (d / "environment").mkdir()
        (d / "task.toml").write_text(f'[environment]\ndocker_image = "{images.layout}"\n')
        (d / "instruction.md").write_text("Write /app/sum.sh.")
        (d / "tests" / "test.sh").write_text(TB_TEST_SH)
        guarded, unguarded = load_harbor(d), load_harbor(d, reward_guard=False)
        with open_task_sandbox(guarded, BWRAP) as sb:
            assert sb.run(["sh", "-c", "printf '%s\\n' " + shlex.quote("echo $(($1 + $2))") + " > sum.sh"]).ok
            on, off = [], []
            for _ in range(n):
                res: list = []
                off.append(_time(lambda: res.append(run_verifier(unguarded, sb))))
                on.append(_time(lambda: res.append(run_verifier(guarded, sb))))
                assert all(r.status == "ok" and r.reward == 1.0 for r in res), res
    _report("Harbor test.sh (Terminal-Bench template), guard", on, off)


def bench_safe_members(n_files: int, n_links: int, n: int) -> float:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for i in range(n_files):
            info = tarfile.TarInfo(f"./d{i % 20}/f{i}.txt")
            info.size = 64
            tar.addfile(info, io.BytesIO(b"x" * 64))
        for i in range(n_links):
            info = tarfile.TarInfo(f"./d{i % 20}/l{i}")
            info.type, info.linkname = tarfile.SYMTYPE, f"../d{(i + 1) % 20}/f{(i + 1) % n_files}.txt"
            tar.addfile(info)
    times = []
    for _ in range(n):
        buf.seek(0)
        with tarfile.open(fileobj=buf) as tar:
            times.append(_time(lambda: safe_members(tar)))
    return statistics.median(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=15)
    p.add_argument("--files", type=int, default=2000)
    p.add_argument("--links", type=int, default=200)
    args = p.parse_args()
    warnings.simplefilter("ignore")
    print("| case | off median ms | off p90 | on median ms | on p90 | on / off |")
    print("|---|---:|---:|---:|---:|---:|")
    task, setup = _native(4, 0)
    bench_links("native, small workspace (4 files, 2 links), vet_links", task,
                "ln -s out.txt o2 && ln -s d0/f0.txt o3", args.n)
    task, setup = _native(args.files, args.links)
    bench_links(f"native, {args.files} files + {args.links} links, vet_links", task, setup, args.n)
    bench_harbor(args.n)
    ms = bench_safe_members(args.files, args.links, args.n)
    print(f"\nsafe_members (final-tree check) over {args.files} files + {args.links} links: {ms:.1f} ms median")


if __name__ == "__main__":
    main()
