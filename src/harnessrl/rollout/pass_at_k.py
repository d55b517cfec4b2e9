"""Evaluation metrics over rollout records: pass@1 and the unbiased pass@k estimator of Chen et al.
(2021), per task, per category and per harness.

A rollout passes when its status is "ok" and its reward meets the task's pass rule (>= 1.0 for the
built-in suite, > 0.5 for ClawGym). Rollouts that ended in an error count as not passed (the agent
did not deliver a verified result); `mean_reward` averages the rollouts that have a reward.
Aggregates are means over (task, harness) groups, so every task weighs the same.

Every aggregate carries a 95% interval for pass@1, `pass@1_ci95`: a percentile bootstrap over
tasks (the (task, harness) groups are resampled with replacement, 2000 times, fixed seed), which
keeps the samples of one task together: they are not independent draws. `pass@1_wilson95` is
the Wilson score interval over rollouts, which treats every rollout as independent (narrower when
tasks differ in difficulty); it is given for comparison.
"""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from harnessrl.store.records import RolloutRecord, is_scored, rollout_passed
from harnessrl.tasks.model import Task

if TYPE_CHECKING:
    from harnessrl.rollout.groups import PlannedGroup


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased estimate of P(at least one of k samples passes) from n samples with c passes:
    1 - C(n-c, k) / C(n, k), computed as a stable product."""
    if not 0 <= c <= n or k < 1:
        raise ValueError(f"need 0 <= c <= n and k >= 1, got n={n} c={c} k={k}")
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples, got {n}")
    if n - c < k:
        return 1.0
    prob_all_fail = 1.0
    for i in range(n - c + 1, n + 1):
        prob_all_fail *= 1.0 - k / i
    return 1.0 - prob_all_fail


CI_METHOD = "percentile bootstrap over tasks (2000 resamples, seed 0)"
BOOTSTRAP_RESAMPLES = 2000


def wilson_interval(c: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson score interval for c successes in n independent trials (95% by default)."""
    if not 0 <= c <= n or n < 1:
        raise ValueError(f"need 0 <= c <= n and n >= 1, got c={c} n={n}")
    p = c / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def bootstrap_interval(values: list[float], level: float = 0.95, resamples: int = BOOTSTRAP_RESAMPLES,
                       seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of `values` (deterministic for a given seed)."""
    if not values:
        raise ValueError("bootstrap_interval needs at least one value")
    rng = random.Random(seed)
    n = len(values)
    means = sorted(sum(rng.choices(values, k=n)) / n for _ in range(resamples))
    tail = (1 - level) / 2
    lo = means[int(math.floor(tail * (resamples - 1)))]
    hi = means[int(math.ceil((1 - tail) * (resamples - 1)))]
    return lo, hi


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _group_stats(records: list[RolloutRecord], task: Task | None, ks: Iterable[int]) -> dict[str, Any]:
    n = len(records)
    c = sum(rollout_passed(r, task) for r in records)
    stats: dict[str, Any] = {"n": n, "passed": c,
                             "mean_reward": _mean([r.reward for r in records if r.reward is not None]),
                             "statuses": dict(Counter(r.status for r in records))}
    for k in sorted(set(ks) | {1}):
        if k <= n:
            stats[f"pass@{k}"] = pass_at_k(n, c, k)
    return stats


def _aggregate(groups: list[dict[str, Any]]) -> dict[str, Any]:
    keys = sorted({k for g in groups for k in g if k.startswith("pass@")}, key=lambda k: int(k[5:]))
    out: dict[str, Any] = {k: _mean([g[k] for g in groups if k in g]) for k in keys}
    out["mean_reward"] = _mean([g["mean_reward"] for g in groups if g["mean_reward"] is not None])
    out["n_tasks"] = len(groups)
    out["n_rollouts"] = sum(g["n"] for g in groups)
    out["passed"] = sum(g["passed"] for g in groups)
    if groups:
        out["pass@1_ci95"] = list(bootstrap_interval([g["pass@1"] for g in groups]))
        out["pass@1_wilson95"] = list(wilson_interval(out["passed"], out["n_rollouts"]))
    out["statuses"] = dict(sum((Counter(g["statuses"]) for g in groups), Counter()))
    return out


def summarize(records: list[RolloutRecord], tasks: dict[str, Task] | None = None,
              ks: Iterable[int] = (1,)) -> dict[str, Any]:
    """The eval summary: overall pass@k, `per_task`, `per_category`, `per_harness` (JSON-ready)."""
    tasks = tasks or {}
    ks = tuple(ks)
    by_group: dict[tuple[str, str], list[RolloutRecord]] = defaultdict(list)
    for r in records:
        by_group[(r.task_id, r.harness)].append(r)
    groups = {key: _group_stats(rs, tasks.get(key[0]), ks) for key, rs in by_group.items()}
    per_task: dict[str, Any] = {}
    for task_id in sorted({t for t, _ in groups}):
        rs = [r for (t, _), g in by_group.items() if t == task_id for r in g]
        per_task[task_id] = {**_group_stats(rs, tasks.get(task_id), ks), "category": rs[0].category}
    per_category = _by(groups, lambda key: by_group[key][0].category)
    per_family = _by(groups, lambda key: _family(tasks.get(key[0]), key[0]))
    per_harness = _by(groups, lambda key: key[1])
    overall = _aggregate(list(groups.values()))
    return {**{k: v for k, v in overall.items() if k.startswith("pass@")}, "mean_reward": overall["mean_reward"],
            "n_tasks": len(per_task), "n_rollouts": overall["n_rollouts"], "passed": overall["passed"],
            "statuses": overall["statuses"], "ci_method": CI_METHOD,
            "per_task": per_task, "per_category": per_category, "per_family": per_family, "per_harness": per_harness}


def summarize_sets(records: list[RolloutRecord], sets: dict[str, list[Task]],
                   ks: Iterable[int] = (1,)) -> dict[str, Any]:
    """One summary per named task set (e.g. test / paraphrase / unseen), each over the records of
    its own tasks, and `per_harness`: harness -> set -> that harness's aggregate in the set."""
    ks = tuple(ks)
    out: dict[str, Any] = {"sets": {}, "per_harness": {}, "ci_method": CI_METHOD}
    for name, tasks in sets.items():
        ids = {t.id for t in tasks}
        summary = summarize([r for r in records if r.task_id in ids], {t.id: t for t in tasks}, ks)
        out["sets"][name] = summary
        for harness, agg in summary["per_harness"].items():
            out["per_harness"].setdefault(harness, {})[name] = agg
    return out


def _family(task: Task | None, task_id: str) -> str:
    return getattr(task, "family", "") or getattr(task, "category", "") or task_id


def _by(groups: dict[tuple[str, str], dict[str, Any]], label: Any) -> dict[str, Any]:
    buckets: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for key, stats in groups.items():
        buckets[label(key)].append(stats)
    return {name: _aggregate(stats) for name, stats in sorted(buckets.items())}


def harness_summary(groups: Sequence[PlannedGroup]) -> dict[str, dict[str, float]]:
    """Per harness over the rollouts of planned groups (a training step): mean reward (scored rollouts),
    pass rate (all rollouts, `rollout_passed`), rollout count, failure count, calls per rollout, and
    rollouts held back for memory before they started (`rollout.memory_gate`)."""
    acc: dict[str, dict[str, list[float]]] = {}
    for g in groups:
        for r in g.rollouts:
            a = acc.setdefault(r.harness, {"reward": [], "passed": [], "failed": [], "calls": [], "held": []})
            ok = is_scored(r.status, r.reward)
            if ok:
                a["reward"].append(float(r.reward))  # type: ignore[arg-type]
            a["passed"].append(float(rollout_passed(r, g.plan.task)))
            a["failed"].append(float(not ok))
            a["calls"].append(float(r.call_count))
            a["held"].append(float("memory_wait_s" in r.durations))
    out: dict[str, dict[str, float]] = {"reward": {}, "pass_rate": {}, "rollouts": {}, "failed": {},
                                        "calls_per_rollout": {}, "memory_held": {}}
    for h, a in acc.items():
        out["reward"][h] = _mean(a["reward"]) or 0.0
        out["pass_rate"][h] = _mean(a["passed"]) or 0.0
        out["rollouts"][h] = float(len(a["passed"]))
        out["failed"][h] = float(sum(a["failed"]))
        out["calls_per_rollout"][h] = _mean(a["calls"]) or 0.0
        out["memory_held"][h] = float(sum(a["held"]))
    return out


def pass_at_1(groups: Sequence[PlannedGroup]) -> dict[str, float]:
    """Held-out pass@1 per harness: `summarize`'s per-harness pass@1 (what `harnessrl eval` reports)
    over the groups' rollouts; an abnormal rollout counts as a fail."""
    records = [r for g in groups for r in g.rollouts]
    tasks = {g.plan.task.id: g.plan.task for g in groups}
    return {h: s.get("pass@1") or 0.0 for h, s in summarize(records, tasks)["per_harness"].items()}
