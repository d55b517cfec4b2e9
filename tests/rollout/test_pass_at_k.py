"""pass@k (Chen et al.) against hand-computed values, and the eval summary's shape."""

from __future__ import annotations

from math import comb

import pytest

from harnessrl.rollout.pass_at_k import bootstrap_interval, pass_at_k, summarize, summarize_sets, wilson_interval
from harnessrl.store.records import RolloutRecord
from harnessrl.tasks.suite import build_suite


@pytest.mark.parametrize("n, c, k, expected", [
    (5, 2, 2, 1 - 3 / 10),        # 1 - C(3,2)/C(5,2)
    (4, 1, 1, 0.25),
    (4, 0, 2, 0.0),
    (4, 4, 3, 1.0),
    (10, 3, 5, 1 - 21 / 252),     # 1 - C(7,5)/C(10,5)
    (3, 1, 3, 1.0),               # n - c < k
])
def test_pass_at_k_hand_values(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected)


def test_pass_at_k_matches_binomial_form():
    for n in range(1, 9):
        for c in range(n + 1):
            for k in range(1, n + 1):
                exact = 1 - comb(n - c, k) / comb(n, k)
                assert pass_at_k(n, c, k) == pytest.approx(exact)


def test_pass_at_k_rejects_bad_input():
    for args in ((3, 4, 1), (3, 1, 0), (3, 1, 4)):
        with pytest.raises(ValueError):
            pass_at_k(*args)


def _rec(task, harness, i, status, reward):
    return RolloutRecord(rollout_id=f"{task.id}:{harness}:{i}", task_id=task.id, harness=harness, group_id=f"{task.id}:{harness}",
                         status=status, reward=reward, sample_idx=i, category=task.category, split=task.split)


def test_summary_per_task_category_harness():
    a, b = build_suite()[0], build_suite()[-1]  # two categories
    records = [_rec(a, "builtin", 0, "ok", 1.0), _rec(a, "builtin", 1, "ok", 0.5),
               _rec(a, "builtin", 2, "timeout", None), _rec(a, "builtin", 3, "verifier_error", None),
               _rec(b, "builtin", 0, "ok", 1.0), _rec(b, "builtin", 1, "ok", 1.0),
               _rec(b, "other", 0, "ok", 0.0), _rec(b, "other", 1, "harness_error", None)]
    s = summarize(records, {a.id: a, b.id: b}, ks=(1, 2))
    assert s["per_task"][a.id]["pass@1"] == 0.25
    assert s["per_task"][a.id]["mean_reward"] == 0.75  # rollouts with a reward only
    assert s["per_task"][a.id]["statuses"] == {"ok": 2, "timeout": 1, "verifier_error": 1}
    assert s["per_task"][a.id]["pass@2"] == pytest.approx(pass_at_k(4, 1, 2))
    assert s["per_task"][b.id]["pass@1"] == 0.5
    assert s["per_harness"]["builtin"]["pass@1"] == pytest.approx((0.25 + 1.0) / 2)
    assert s["per_harness"]["other"]["pass@1"] == 0.0
    assert s["per_category"][a.category]["pass@1"] == 0.25
    assert s["pass@1"] == pytest.approx((0.25 + 1.0 + 0.0) / 3)  # mean over (task, harness) groups
    assert s["n_rollouts"] == 8 and s["n_tasks"] == 2


def test_clawgym_threshold_is_strictly_above_half():
    from harnessrl.tasks.model import Task, Verifier

    t = Task(id="c", instruction="x", files={}, verifier=Verifier("reward_line", "bash reward.sh"),
             pass_threshold=0.5, pass_rule=">")
    rs = [_rec(t, "h", 0, "ok", 0.5), _rec(t, "h", 1, "ok", 0.6)]
    assert summarize(rs, {"c": t})["pass@1"] == 0.5


@pytest.mark.parametrize("c, n, lo, hi", [
    (0, 10, 0.0, 0.2775),       # textbook Wilson values (z = 1.96)
    (5, 10, 0.2366, 0.7634),
    (10, 10, 0.7225, 1.0),
    (1, 48, 0.0037, 0.1089),
])
def test_wilson_interval_hand_values(c, n, lo, hi):
    got = wilson_interval(c, n)
    assert got[0] == pytest.approx(lo, abs=1e-3) and got[1] == pytest.approx(hi, abs=1e-3)


def test_wilson_interval_rejects_bad_input():
    for c, n in ((1, 0), (3, 2), (-1, 4)):
        with pytest.raises(ValueError):
            wilson_interval(c, n)


def test_bootstrap_interval_properties():
    assert bootstrap_interval([0.5]) == (0.5, 0.5)  # one task: nothing to resample
    assert bootstrap_interval([0.0] * 20) == (0.0, 0.0)
    values = [1.0] * 12 + [0.0] * 36  # 48 tasks, mean 0.25
    lo, hi = bootstrap_interval(values)
    assert lo < 0.25 < hi
    # the normal approximation of the mean's 95% interval: 0.25 +- 1.96 * sqrt(0.25*0.75/48) = +-0.1225
    assert lo == pytest.approx(0.25 - 0.1225, abs=0.03) and hi == pytest.approx(0.25 + 0.1225, abs=0.03)
    assert bootstrap_interval(values) == (lo, hi)  # deterministic
    wide = bootstrap_interval(values[:8] + values[-8:])  # fewer tasks -> wider
    assert wide[1] - wide[0] > hi - lo
    with pytest.raises(ValueError):
        bootstrap_interval([])


def test_summary_intervals_and_sets():
    suite = build_suite()
    test = [t for t in suite if t.split == "test"][:6]
    unseen = [t for t in suite if t.split == "unseen"][:4]
    records = [_rec(t, "builtin", i, "ok", 1.0 if (i == 0 and j % 2 == 0) else 0.0)
               for j, t in enumerate(test + unseen) for i in range(2)]
    s = summarize_sets(records, {"test": test, "unseen": unseen}, ks=(1, 2))
    assert set(s["sets"]) == {"test", "unseen"} and set(s["per_harness"]["builtin"]) == {"test", "unseen"}
    t = s["sets"]["test"]
    assert t["n_tasks"] == 6 and t["n_rollouts"] == 12 and t["passed"] == 3
    assert t["pass@1"] == pytest.approx(0.25) and t["pass@2"] == pytest.approx(0.5)
    lo, hi = t["pass@1_ci95"]
    assert 0.0 <= lo < 0.25 < hi <= 0.5  # a task's pass@1 is 0 or 0.5 here: the mean cannot pass 0.5
    w = t["per_harness"]["builtin"]["pass@1_wilson95"]
    assert w == pytest.approx(list(wilson_interval(3, 12)))
    assert s["per_harness"]["builtin"]["unseen"]["n_tasks"] == 4
    assert set(t["per_family"]) == {x.family for x in test}
    assert "bootstrap" in s["ci_method"]
