"""Run every benchmark script once, in its quick mode, and say which ran (what `make bench` does).

Each script prints its own figures; this runner only starts them with small sizes, bounds each
with a timeout and ends with a table (script, exit status, seconds). The figures recorded in
docs/benchmarks.md come from each script's full mode, run by hand with the command written next
to the figure; `--full` runs every script with its defaults instead (hours on a CPU machine).

    .venv/bin/python benchmarks/run_all.py [--only tree_sharing train_speed ...] [--full] [--timeout 900]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

# script -> arguments of its quick mode (small sizes; the cheapest backend)
QUICK: dict[str, list[str]] = {
    "tree_sharing.py": ["--rollouts", "4", "--prefix", "2000", "--turns", "4", "--seeds", "1",
                        "--build-calls", "100", "--call-tokens", "2000", "--repeats", "1"],
    "render_prepare.py": ["--turns", "5"],
    "train_speed.py": ["--layers", "2", "--prefix", "256", "--rollouts", "2", "--turns", "2", "--budget", "1024"],
    "update_cost.py": ["--layers", "2", "--repeats", "1", "--candidates", "cosine,fused"],
    "proxy_overhead.py": ["--quick"],
    "sandbox_startup.py": ["--n", "5"],
    "gpu_smoke.py": ["--device", "cpu", "--quick", "--budget-s", "120"],
    "engine_throughput.py": ["--backends", "hf", "--batches", "1,4", "--max-tokens", "8"],
    "rollout_throughput.py": ["--policy", "scripted", "--per-level", "2", "--levels", "1", "2"],
    "harness_overhead.py": ["--harness", "builtin", "--runs", "1"],
    "harness_prompt_size.py": ["--harness", "builtin"],
    "async_throughput.py": ["--steps", "2", "--groups", "1", "--n", "2", "--max-tokens", "16",
                            "--model", "tiny:64:2"],
    "bash_format_vs_json.py": ["--prompt-sizes"],
    "bash_format_instruction.py": ["--tasks", "2", "--samples", "1", "--max-tokens", "32"],
    "learning/harnesses.py": ["--run-dir", "{tmp}/learning-harnesses", "loop.steps=1", "loop.eval_size=1",
                              "loop.groups_per_step=1", "loop.n_per_group=2"],
    "learning/run.py": ["--out", "{tmp}/learning", "loop.steps=1", "loop.eval_size=1", "loop.groups_per_step=1", "loop.n_per_group=2"],
    "bench_update_precision.py": ["--steps", "1"],
    "logprob_gap.py": ["--steps", "1"],
    "proxy_kill9.py": ["--sessions", "48", "--turns", "2"],
    "proxy_sessions.py": ["--sessions", "64", "--churn", "200"],
    "proxy_stall.py": ["--mb", "1", "--repeat", "1"],
    "rollout_overhead.py": ["--harness", "claude-code:tiny"],
    "sandbox_limits.py": ["--normal", "2", "--timeout", "10"],
    "sampler_calibration.py": ["--simulate", "--runs-n", "3"],
    "train_kill9.py": ["--trials", "1"],
    "verifier_defence.py": ["--n", "2"],
    "verifier_view.py": ["--n", "2", "--big-mb", "2"],
    "whitebox_overhead.py": ["--harness", "whitebox", "builtin", "--runs", "1"],
    "workspace_copy.py": ["--n", "1", "--files", "200"],
    "warm_pool.py": ["--harness", "builtin", "--n", "2", "--rounds", "1"],
    "reward_integrity.py": ["--n", "2", "--files", "50", "--links", "5"],
    "stream_ttft.py": ["--engine", "scripted", "--reps", "2", "--max-tokens", "16"],
    "tree_credit_sim.py": ["--seeds", "2", "--steps", "5"],
}

# scripts without a quick mode, and why: they read finished runs, or are training runs themselves
SKIP: dict[str, str] = {
    "demo_runs.py": "summarises finished demo run dirs (RUN_DIR ...)",
    "suite_calibration.py": "summarises a finished eval's run dir",
    "difficulty_replay.py": "replays finished run dirs (RUN_DIR ...) through the difficulty estimates",
    "branch_outcomes.py": "reads a finished experiment dir (harnessrl experiment --out)",
    "lookup_actions.py": "reads finished run dirs (RUN_DIR ...) that evaluated builtin:lookup",
    "file_job_reads.py": "reads finished run dirs (RUN_DIR ...) that evaluated the held-out file jobs",
    "family_transfer.py": "starts from a finished run's cold start (RUN_DIR with cold_start/)",
    "learning/first_commands.py": "reads a finished run dir",
    "learning/fork_baseline.py": "starts a run from another run's baseline",
    "learning/branching.py": "a comparison of training runs (hours)",
    "stability.py": "a long training run",
    "optimisations.py": "two 3-step demo trainings (~15 min)",
    "openclaw_startup.py": "needs OpenClaw installed (harnessrl harness install openclaw); 20-60 s a rollout",
    "openclaw_profile.py": "needs OpenClaw installed (harnessrl harness install openclaw); one 20-60 s start",
}


def scripts() -> list[str]:
    """Every benchmark script next to this file (run_all itself excluded)."""
    found = sorted(str(p.relative_to(HERE)) for p in HERE.rglob("*.py") if p.name != "run_all.py")
    unknown = [s for s in found if s not in QUICK and s not in SKIP]
    if unknown:
        raise SystemExit(f"no quick mode known for {unknown}: add them to QUICK (or SKIP, with why) in "
                         f"{Path(__file__).name}")
    return [s for s in found if s in QUICK]


def run(script: str, full: bool, timeout_s: float, tmp: str) -> tuple[str, float]:
    argv = [sys.executable, str(HERE / script), *([] if full else [a.replace("{tmp}", tmp) for a in QUICK[script]])]
    print(f"\n### {script}: {' '.join(argv[1:])}", flush=True)
    t0 = time.monotonic()
    try:
        rc = subprocess.run(argv, timeout=timeout_s).returncode
        status = "ok" if rc == 0 else f"exit {rc}"
    except subprocess.TimeoutExpired:
        status = f"timeout {timeout_s:.0f}s"
    return status, time.monotonic() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=None, help="script names (without .py) to run")
    ap.add_argument("--full", action="store_true", help="each script with its own defaults (slow)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per script")
    args = ap.parse_args()
    chosen = scripts()
    if args.only:
        want = {o.removesuffix(".py") for o in args.only}
        chosen = [s for s in chosen if s.removesuffix(".py") in want]
        if not chosen:
            raise SystemExit(f"--only {args.only}: no such benchmark; have {scripts()}")
    with tempfile.TemporaryDirectory(prefix="harnessrl-bench-") as tmp:  # run dirs of the quick runs
        results = [(s, *run(s, args.full, args.timeout, tmp)) for s in chosen]
    print("\n| script | status | seconds |\n|---|---|---|")
    for script, status, secs in results:
        print(f"| {script} | {status} | {secs:.0f} |")
    if not args.only:
        for script, why in SKIP.items():
            print(f"| {script} | not run: {why} | - |")
    return 0 if all(status == "ok" for _, status, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
