"""One baseline eval shared by several training runs (`harnessrl experiment`, experiment/arms.py).

A run records the held-out eval of its initial policy as step 0, unless its store already holds a
step 0 (run/loop.py). `adopt_baseline` gives a new run directory a copy of a baseline run's store:
its step-0 record, its eval rollouts and calls, and its pinned held-out task ids; the new run, started
with `resume=True`, then skips the baseline eval and evaluates the same tasks after training. The
baseline run itself is the base config with `loop.steps=0` (an eval of the initial policy, nothing
trained).

A baseline applies only to a run that evaluates the same way: `baseline_differences` names what
differs among the settings the eval depends on (the eval harnesses, tasks, rendering, serving,
sandbox, engine and the eval sizes and limits). The model is left out on purpose: an arm that starts
from another checkpoint (a cold start) is measured against the base model's eval, which is what
"cold start + RL against RL" compares.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from harnessrl.errors import HarnessRLError
from harnessrl.store.schema import DB_NAME

BASELINE_SECTIONS = ("render", "serve", "sandbox", "tasks", "engine")
BASELINE_LOOP_KEYS = ("eval_size", "eval_samples", "max_tokens", "max_turns", "rollout_timeout_s", "seed")


class BaselineError(HarnessRLError, ValueError):
    """A shared baseline cannot be used for a run (the message names what differs, or what is missing)."""


def eval_harnesses(cfg: dict[str, Any]) -> list[dict[str, Any]]:
    """The harnesses a resolved config (as dumped to JSON) evaluates through, without their weights."""
    entries = cfg.get("eval_harnesses") or cfg.get("harnesses") or []
    return [{"name": h.get("name"), "options": h.get("options") or {}} for h in entries]


def baseline_differences(baseline: dict[str, Any], run: dict[str, Any]) -> list[str]:
    """The settings the baseline eval depends on that differ between two resolved configs (JSON dumps)."""
    diffs = [s for s in BASELINE_SECTIONS if baseline.get(s) != run.get(s)]
    if eval_harnesses(baseline) != eval_harnesses(run):
        diffs.append("eval harnesses (eval_harnesses, or harnesses without it)")
    diffs += [f"loop.{k}" for k in BASELINE_LOOP_KEYS
              if (baseline.get("loop") or {}).get(k) != (run.get("loop") or {}).get(k)]
    return diffs


def adopt_baseline(baseline_dir: Path, run_dir: Path) -> None:
    """Start `run_dir` (which must not hold a run yet) from a copy of `baseline_dir`'s store: its step 0
    (record, eval rollouts and their calls) and its meta (the pinned held-out task ids)."""
    src = Path(baseline_dir) / DB_NAME
    dest = Path(run_dir) / DB_NAME
    if not src.is_file():
        raise BaselineError(f"{baseline_dir} holds no baseline run (no {DB_NAME})")
    if dest.exists():
        raise BaselineError(f"{run_dir} already holds a run: it keeps its own baseline")
    with sqlite3.connect(src) as db:
        steps = {s for (s,) in db.execute("SELECT step FROM steps")}
    if steps != {0}:
        raise BaselineError(f"{baseline_dir} is not a baseline run: it records steps {sorted(steps)}, "
                            "a baseline run records step 0 only (loop.steps=0)")
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    part.unlink(missing_ok=True)
    src_conn, out = sqlite3.connect(src), sqlite3.connect(part)
    try:
        src_conn.backup(out)  # a consistent copy, even of a store another process has open
        with out:  # the new run records its own config when it starts
            out.execute("DELETE FROM meta WHERE key = 'config'")
            out.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('baseline_from', ?)",
                        (json.dumps(str(Path(baseline_dir).resolve())),))
    finally:
        src_conn.close()
        out.close()
    part.replace(dest)  # the run dir holds the whole copy or none of it
