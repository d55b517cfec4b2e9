"""`harnessrl eval --json` attached to a running proxy (scripted policy): exactly one JSON object on
stdout with the documented keys; `rollout --limit`; `harnessrl tasks validate` exit codes."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from harnessrl.proxy.server import ProxyServer
from harnessrl.tasks import load_tasks

from .solver import solver_engine

CLI = [sys.executable, "-m", "harnessrl.app"]


def test_eval_json_attached_to_a_proxy(renderer, store, tmp_path):
    tasks = load_tasks("builtin:write_word:test")[:2]
    server = ProxyServer(solver_engine(renderer, tasks, lambda t: t is tasks[0]), store, renderer).start()
    try:
        out = subprocess.run(CLI + ["eval", "--tasks", "builtin:write_word:test", "-n", "2", "--sandbox", "local",
                                    "--proxy", f"http://127.0.0.1:{server.port}", "--admin-token", server.admin_token,
                                    "--max-turns", "3", "--json"],  # stored in the proxy's run dir
                             capture_output=True, text=True, timeout=600)
    finally:
        server.stop()
    assert out.returncode == 0, out.stderr[-2000:]
    summary = json.loads(out.stdout)  # the whole stdout is one JSON object
    assert {"pass@1", "per_task", "per_category", "per_harness"} <= set(summary)
    per_task = summary["per_task"]
    assert per_task[tasks[0].id]["pass@1"] == 1.0 and per_task[tasks[0].id]["mean_reward"] == 1.0
    assert per_task[tasks[1].id]["pass@1"] == 0.0 and per_task[tasks[1].id]["statuses"] == {"ok": 2}
    assert summary["per_harness"]["builtin"]["n_rollouts"] == 2 * len(per_task)
    assert "per category" in out.stderr  # the table went to stderr
    # stderr is a pipe: plain progress lines, not a live bar (harnessrl/plain_progress.py)
    total = 2 * len(per_task)
    assert f"rollouts: start, 0/{total} rollouts" in out.stderr
    assert f"rollouts: done {total}/{total} rollouts (ok {total})" in out.stderr
    lo, hi = summary["per_harness"]["builtin"]["pass@1_ci95"]
    assert lo <= summary["per_harness"]["builtin"]["pass@1"] <= hi and "bootstrap" in summary["ci_method"]


def test_eval_several_sets_with_limit(renderer, store, tmp_path):
    """--tasks repeated: one summary per set, and a harness x set table; --limit caps each set."""
    sets = {"builtin:write_word:paraphrase": load_tasks("builtin:write_word:paraphrase")[:2],
            "builtin:unseen": load_tasks("builtin:unseen")}
    everything = [t for ts in sets.values() for t in ts]
    server = ProxyServer(solver_engine(renderer, everything, lambda t: t.split == "paraphrase"), store,
                         renderer).start()
    try:
        out = subprocess.run(CLI + ["eval", *[a for s in sets for a in ("--tasks", s)], "--limit", "2", "-n", "1",
                                    "--sandbox", "local", "--proxy", f"http://127.0.0.1:{server.port}",
                                    "--admin-token", server.admin_token, "--max-turns", "3", "--json"], capture_output=True, text=True, timeout=600)
    finally:
        server.stop()
    assert out.returncode == 0, out.stderr[-2000:]
    summary = json.loads(out.stdout)
    assert set(summary["sets"]) == set(sets)
    para, unseen = summary["sets"]["builtin:write_word:paraphrase"], summary["sets"]["builtin:unseen"]
    assert para["n_tasks"] == 2 and para["pass@1"] == 1.0
    assert unseen["n_tasks"] == 2 and unseen["pass@1"] == 0.0
    assert len({t.split("-")[0] for t in unseen["per_task"]}) == 2  # --limit takes one family at a time
    assert summary["per_harness"]["builtin"]["builtin:unseen"]["pass@1_ci95"] == [0.0, 0.0]
    assert "per harness and task set" in out.stderr
    bad = subprocess.run(CLI + ["eval", "--tasks", "builtin:nope"], capture_output=True, text=True)
    assert bad.returncode == 2 and "unknown category or family" in bad.stderr


def test_rollout_takes_limit_as_eval_does(renderer, store, tmp_path):
    """`rollout --limit N`: the first N tasks of --tasks, one family at a time (as `eval --limit`)."""
    tasks = load_tasks("builtin:unseen")
    server = ProxyServer(solver_engine(renderer, tasks, lambda t: False), store, renderer).start()
    try:
        out = subprocess.run(CLI + ["rollout", "--tasks", "builtin:unseen", "--limit", "2", "-n", "1", "--sandbox",
                                    "local", "--proxy", f"http://127.0.0.1:{server.port}", "--admin-token",
                                    server.admin_token, "--max-turns", "2"], capture_output=True, text=True, timeout=600)
    finally:
        server.stop()
    assert out.returncode == 0, out.stderr[-2000:]
    ran = {r.task_id for r in store.list_rollouts()}
    assert len(ran) == 2 and len({t.split("-")[0] for t in ran}) == 2 < len(tasks)


def test_tasks_validate_exit_codes(tmp_path):
    ok = subprocess.run(CLI + ["tasks", "validate", "builtin:csv_header:unseen", "--sandbox", "local"],
                        capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert re.search(r"(\d+)/\1 tasks valid", ok.stdout), ok.stdout
    bad = subprocess.run(CLI + ["tasks", "validate", str(tmp_path / "nope")], capture_output=True, text=True)
    assert bad.returncode == 2 and "error:" in bad.stderr and "Traceback" not in bad.stderr
