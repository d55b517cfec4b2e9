"""pass@k (Chen et al.) against hand-computed values, and the eval summary's shape."""

from __future__ import annotations

from math import comb

import pytest

from harnessrl.rollout.metrics import pass_at_k, summarize
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
