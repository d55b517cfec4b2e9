"""What the verifier's defence against the code it runs costs (docs/security.md, "The verifier and the code it runs").

    nice -n 10 .venv/bin/python benchmarks/verifier_defence.py [--n 10]

Cases, round-robin, wall median/p90 and CPU median (this process + children) in ms:
- the verifier's sandbox alone: create + destroy, /proc writable vs read-only;
- run_verifier on a solved fix_calc workspace (copy out, fresh view, verify.py with its two
  children): shipped (read-only /proc, non-dumpable checker, children in Landlock) vs /proc
  writable vs the checker's layers cut out (protect_self off, plain subprocess) vs neither;
- in the checker: one child `python3 -c pass` through run_shut_out vs subprocess.run.
"""
import argparse, dataclasses, functools, resource, statistics, subprocess, sys, time, os
from harnessrl.sandbox import SandboxConfig, make_sandbox, views
from harnessrl.tasks import load_tasks
from harnessrl.rollout.task_sandbox import open_task_sandbox, run_commands
from harnessrl.tasks.verifier import run_verifier
from harnessrl.tasks.suite import step_checker

def cpu():
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime

ap = argparse.ArgumentParser(); ap.add_argument("--n", type=int, default=10); n = ap.parse_args().n
task = next(t for t in load_tasks("builtin:office") if t.family == "fix_calc")
src = task.verifier.files["verify.py"].decode()
weak_src = src.replace("def main():\n    protect_self()", "def main():\n    pass").replace(
    "    ruleset = shut_out_ruleset(", "    return subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout)\n    ruleset = shut_out_ruleset(")
weak = dataclasses.replace(task, verifier=dataclasses.replace(task.verifier, files={**task.verifier.files, "verify.py": weak_src.encode()}))
orig_view = views.fresh_view
cfg = SandboxConfig()

def start(ro):
    def run():
        with make_sandbox(cfg.model_copy(update={"read_only_proc": ro})):
            pass
    return run, None

def verify(t, ro):
    def setup():
        sb = open_task_sandbox(t, cfg)
        assert not run_commands(sb, task.reference_solution)
        return sb
    def run(sb):
        views.fresh_view = functools.partial(orig_view, read_only_proc=ro)
        try:
            r = run_verifier(t, sb)
        finally:
            views.fresh_view = orig_view
            sb.destroy()
        assert r.status == "ok" and r.reward == 1.0, r
    return run, setup

def child(shut):
    cmd = [sys.executable, "-c", "pass"]
    def run():
        r = step_checker.run_shut_out(cmd, 20) if shut else subprocess.run(cmd, capture_output=True, text=True, timeout=20)
        assert r.returncode == 0
    return run, None

cases = {
    "verifier sandbox create+destroy, /proc rw": start(False),
    "verifier sandbox create+destroy, /proc ro": start(True),
    "fix_calc run_verifier: shipped (ro /proc + Landlock + non-dumpable)": verify(task, True),
    "fix_calc run_verifier: ro /proc off": verify(task, False),
    "fix_calc run_verifier: checker layers off (ro /proc on)": verify(weak, True),
    "fix_calc run_verifier: neither (before)": verify(weak, False),
    "checker child `python3 -c pass`: run_shut_out": child(True),
    "checker child `python3 -c pass`: subprocess.run": child(False),
}
out = {k: ([], []) for k in cases}
for i in range(n + 1):
    for name, (run, setup) in cases.items():
        arg = setup() if setup else None
        t0, c0 = time.perf_counter(), cpu()
        run(arg) if setup else run()
        if i:  # the first round warms up
            out[name][0].append((time.perf_counter() - t0) * 1000); out[name][1].append((cpu() - c0) * 1000)
print(f"n={n} per case, round-robin, nice 10, 2 shared cores")
print("| case | wall median ms | wall p90 ms | cpu median ms |\n|---|---:|---:|---:|")
for name, (w, c) in out.items():
    print(f"| {name} | {statistics.median(w):.1f} | {statistics.quantiles(w, n=10)[-1]:.1f} | {statistics.median(c):.1f} |")
