"""In-sandbox launcher: prepare a private HOME, run one harness, bound it, kill its whole tree.

Standard library only. Adapters send this file's source to the sandbox as `python -c <source>
<spec-json>`, so nothing has to be copied in. The spec says which dirs to create, which config
files to write, the argv/env/cwd of the harness and its time limit. Every string in it may hold
`@RUN@` (this run's private dir, `$HOME/.harnessrl/<run_id>` of the sandbox, so it is cleaned with
the sandbox) and env values may hold `@PATH@` (the sandbox's PATH). The launcher

- becomes a child subreaper, so every descendant (even a double-forked daemon) stays its child,
  and reaps, as an init process does: every child that exits (the orphans it adopted included) is
  collected at once (woken by SIGCHLD) while the harness runs, so zombies never pile up against
  the sandbox's process limit (`max_procs` counts live processes; 1,000 short-lived background
  jobs of an honest harness end `ok`);
- starts the harness in a new session with stdin = /dev/null;
- on the time limit, or when it gets SIGTERM/SIGINT, sends SIGTERM then SIGKILL to every
  descendant and exits 124 (timeout) / 143 (terminated);
- after a normal exit kills leftover descendants (they would hold the output pipes open);
- prints the files named in `collect` as a stdout line `@@HARNESSRL_FILES <json>`;
- prints, as its very last stdout line, `@@HARNESSRL_CPU <json>`: the CPU seconds (user, system)
  of the harness's whole process tree (every descendant is its child, so getrusage(RUSAGE_CHILDREN)
  holds them all once reaped) and of the launcher itself.
"""

from __future__ import annotations

import ctypes
import json
import os
import select
import signal
import subprocess
import sys
import time

FILES_MARKER = "@@HARNESSRL_FILES "
CPU_MARKER = "@@HARNESSRL_CPU "
RUN_TOKEN = "@RUN@"
PATH_TOKEN = "@PATH@"
TIMEOUT_EXIT = 124
TERM_EXIT = 143
_PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def descendants(root: int) -> list[int]:
    """Pids of all live descendants of `root` (walks /proc parent links)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def reap(harness_pid: int = -1) -> int | None:
    """Collect every child that has exited (adopted orphans included); returns the harness's exit
    code (negative: killed by that signal) when it was among them, else None."""
    code = None
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return code
        except InterruptedError:
            continue
        if pid == 0:
            return code
        if pid == harness_pid:
            code = os.waitstatus_to_exitcode(status)


def child_wakeup() -> int:
    """A pipe's read end that becomes readable when a child exits (SIGCHLD through the signal
    wakeup fd): the wait loop sleeps on it instead of polling blind."""
    r, w = os.pipe()
    os.set_blocking(r, False)
    os.set_blocking(w, False)
    signal.set_wakeup_fd(w)
    signal.signal(signal.SIGCHLD, lambda _signum, _frame: None)
    return r


def wait_wakeup(fd: int, timeout_s: float) -> None:
    """Sleep until a signal arrives on the wakeup pipe ``fd`` or ``timeout_s`` passes, then drain it."""
    try:
        select.select([fd], [], [], max(0.0, timeout_s))
        while os.read(fd, 4096):
            pass
    except (BlockingIOError, InterruptedError):
        pass


def kill_tree(grace_s: float = 3.0) -> int:
    """SIGTERM every descendant of this process, then SIGKILL survivors. Returns how many were hit."""
    me = os.getpid()
    pids = descendants(me)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        reap()
        if not descendants(me):
            return len(pids)
        time.sleep(0.05)
    for pid in descendants(me):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for _ in range(100):
        reap()
        if not descendants(me):
            break
        time.sleep(0.02)
    return len(pids)


def run_root(run_id: str) -> str:
    base = os.environ.get("HOME") or os.environ.get("TMPDIR") or "/tmp"
    return os.path.join(base, ".harnessrl", run_id)


def substitute(obj: object, root: str) -> object:
    """Replace @RUN@ in every string of a JSON-like value."""
    if isinstance(obj, str):
        return obj.replace(RUN_TOKEN, root)
    if isinstance(obj, list):
        return [substitute(x, root) for x in obj]
    if isinstance(obj, dict):
        return {substitute(k, root): substitute(v, root) for k, v in obj.items()}
    return obj


def harness_env(spec_env: dict) -> dict:
    env = dict(os.environ)
    for k, v in spec_env.items():
        env[k] = v.replace(PATH_TOKEN, os.environ.get("PATH", "/usr/bin:/bin"))
    return env


def prepare(spec: dict) -> None:
    for d in spec.get("dirs", []):
        os.makedirs(d, exist_ok=True)
    for path, content in spec.get("files", {}).items():
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(content)


def collect(paths: list[str], limit: int = 4_000_000) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for p in paths:
        try:
            with open(p, encoding="utf-8", errors="replace") as f:
                out[p] = f.read(limit)
        except OSError:
            out[p] = None
    return out


def cpu_report() -> dict:
    """CPU seconds of the reaped process tree (harness_*) and of this launcher (launcher_*)."""
    import resource

    tree, me = resource.getrusage(resource.RUSAGE_CHILDREN), resource.getrusage(resource.RUSAGE_SELF)
    return {"harness_user_s": round(tree.ru_utime, 4), "harness_system_s": round(tree.ru_stime, 4),
            "launcher_user_s": round(me.ru_utime, 4), "launcher_system_s": round(me.ru_stime, 4)}


def main(raw_spec: dict) -> int:
    keys = list(raw_spec.get("collect", []))
    spec = substitute(raw_spec, run_root(str(raw_spec.get("run_id", "run"))))
    if not isinstance(spec, dict):  # substitute keeps a dict a dict
        raise TypeError(f"the launch spec must be a JSON object, not {type(spec).__name__}")
    prepare(spec)
    become_subreaper()
    stopping: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        stopping.append(signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    wakeup = child_wakeup()
    env = harness_env(spec.get("env") or {})
    try:
        proc = subprocess.Popen(spec["argv"], env=env, cwd=spec.get("cwd") or None,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    except OSError as e:
        print(f"harnessrl launcher: cannot start {spec['argv'][0]!r}: {e}", file=sys.stderr)
        return 127
    deadline = time.monotonic() + float(spec.get("timeout_s", 3600))
    code = None
    while code is None:
        code = reap(proc.pid)  # the harness and every orphan: no zombie outlives a wakeup
        if code is not None:
            break
        if stopping or time.monotonic() >= deadline:
            why = "terminated" if stopping else f"timeout after {spec.get('timeout_s')}s"
            n = kill_tree(float(spec.get("grace_s", 3.0)))
            print(f"harnessrl launcher: {why}; killed {n} processes", file=sys.stderr, flush=True)
            code = TERM_EXIT if stopping else TIMEOUT_EXIT
            break
        wait_wakeup(wakeup, min(0.5, deadline - time.monotonic()))
    left = kill_tree(float(spec.get("grace_s", 3.0)))
    if left:
        print(f"harnessrl launcher: killed {left} leftover processes", file=sys.stderr, flush=True)
    if spec.get("collect"):
        sys.stdout.flush()
        got = collect(spec["collect"])
        sys.stdout.write("\n" + FILES_MARKER + json.dumps(dict(zip(keys, got.values()))) + "\n")
    reap()
    sys.stdout.write("\n" + CPU_MARKER + json.dumps(cpu_report()) + "\n")
    sys.stdout.flush()
    if code < 0:  # killed by a signal: shell convention
        code = 128 - code
    return code


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
