"""The difficulty sampler's estimate of a mixed group (rollout/difficulty.py, issue 43): a group's
rate a draw around its task's posterior mean with the fitted dispersion k, scored on a constructed
polarised history where the sampler goes back to tasks it saw mixed (as the recorded demo runs
did); eval groups moving it through the loop's own feed (run/step_groups.py observe_eval); an
unseen task pulled to its family's rate; k following how far a task's groups scatter; and the
report's causal constant."""

from __future__ import annotations


import pytest

from harnessrl.report.sampling import causal_shares
from harnessrl.rollout.difficulty import DifficultyTracker, Observation, SamplerConfig, brier, p_mixed
from harnessrl.rollout.groups import PlannedGroup
from harnessrl.rollout.plan import GroupPlan
from harnessrl.run.step_groups import observe_eval
from harnessrl.store.records import RolloutRecord
from tests.support.tasks import PassTask as Task

CFG = SamplerConfig(type="difficulty")




def revisit_history(steps: int = 8, n: int = 6) -> list[Observation]:
    """Per step: an unseen task that comes back mixed, an unseen one that all-fails or all-passes,
    an unseen one of a family that never passes, and (as the sampler's replacements did) the last
    step's mixed task again, which the policy trained on: half the time it now passes every time."""
    out = []
    for s in range(1, steps + 1):
        out.append(Observation(s, f"mixed{s}", "f", "h", 3, n))
        out.append(Observation(s, f"polar{s}", "f", "h", 0 if s % 2 else n, n))
        out.append(Observation(s, f"hard{s}", "g", "h", 0, n))
        if s > 1:
            out.append(Observation(s, f"mixed{s - 1}", "f", "h", n if s % 2 else 4, n))
    return out


def test_on_a_polarised_history_with_revisits_the_estimate_beats_a_constant_and_the_posterior():
    obs = revisit_history()
    t = DifficultyTracker(obs, CFG)
    new, old, revisits = [], [], []
    for o in obs:
        seen = t.until(o.step - 1)  # the groups of the steps before
        y = 0 < o.passes < o.n
        new.append((seen.p_mixed(o.task, o.family, o.harness, o.step, o.n), y))
        old.append((seen.posterior_p_mixed(o.task, o.family, o.harness, o.step, o.n), y))
        if o.task.startswith("mixed") and o.task != f"mixed{o.step}":
            revisits.append((new[-1][0], old[-1][0], y))
    share = sum(y for _, y in new) / len(new)
    assert brier(new) < min(brier((share, y) for _, y in new), brier(old))  # 0.216 against 0.237 and 0.227
    # the posterior grows sure a task seen mixed stays mixed; the estimate does not
    assert min(b for _, b, _ in revisits) > 0.85 > 0.75 > max(a for a, _, _ in revisits)
    assert brier((a, y) for a, _, y in revisits) < brier((b, y) for _, b, y in revisits)


def eval_group(task: str, rewards: list[float], step: int = 0) -> PlannedGroup:
    gid = f"eval-s{step}-{task}"
    rollouts = [RolloutRecord(rollout_id=f"{gid}:{i}", task_id=task, harness="h", group_id=gid, status="ok",
                              reward=r, step=step, sample_idx=i, split="test") for i, r in enumerate(rewards)]
    return PlannedGroup(GroupPlan(gid, Task(task, family="f"), "h", len(rewards), "test", step), rollouts, [])


def test_eval_rollouts_move_the_estimate_of_an_unseen_training_task():
    t = DifficultyTracker([Observation(1, "t0", "f", "h", 5, 6)], CFG)
    before = (t.pass_rate("t1", "f", "h", 2), t.p_mixed("t1", "f", "h", 2, 6))
    observe_eval(t, 1, [eval_group("e0", [0.0, 0.0, 0.0], 1), eval_group("e1", [0.0, 0.0, 1.0], 1)])
    assert [(o.task, o.split, o.passes, o.n) for o in t.observations[1:]] == [("e0", "eval", 0, 3),
                                                                              ("e1", "eval", 1, 3)]
    after = (t.pass_rate("t1", "f", "h", 2), t.p_mixed("t1", "f", "h", 2, 6))
    assert after[0] < before[0]  # the family now fails more often: so does its unseen task
    assert after[1] != pytest.approx(before[1])
    observe_eval(t, 1, [eval_group("e0", [1.0, 1.0, 1.0], 1)])  # the same eval again (after a crash): replaced
    assert [(o.task, o.passes) for o in t.observations if o.split == "eval"] == [("e0", 3)]


def test_an_unseen_task_is_pulled_to_its_familys_rate():
    obs = [Observation(1, f"easy{i}", "easy", "h", 6, 6) for i in range(3)]
    obs += [Observation(1, f"hard{i}", "hard", "h", 0, 6) for i in range(3)]
    obs += [Observation(1, f"mid{i}", "mid", "h", k, 6) for i, k in enumerate((2, 3, 4))]
    t = DifficultyTracker(obs, CFG)
    for fam in ("easy", "hard", "mid"):
        assert t.pass_rate("unseen", fam, "h", 2) == pytest.approx(t.family_rate(fam, "h", 2))
    assert t.family_rate("hard", "h", 2) == pytest.approx((2 * 0.5 + 0) / (2 + 18))
    assert t.pass_rate("unseen", "hard", "h", 2) < 0.1 < 0.9 < t.pass_rate("unseen", "easy", "h", 2)
    # a task's own groups pull it off its family's rate, but not all the way
    t2 = DifficultyTracker([*obs, Observation(1, "odd", "easy", "h", 0, 6)], CFG)
    assert 0.0 < t2.pass_rate("odd", "easy", "h", 2) < t2.family_rate("easy", "h", 2)
    assert t.p_mixed("unseen", "mid", "h", 2, 6) > 2 * t.p_mixed("unseen", "hard", "h", 2, 6)


def scattered(flip: bool) -> list[Observation]:
    """Four tasks seen at six steps: each task's groups alike (flip False) or all-fail and all-pass
    in turn (flip True)."""
    return [Observation(s, f"t{i}", "f", "h", ((0 if (s + i) % 2 else 6) if flip else (1, 3, 5, 2)[i]), 6)
            for s in range(1, 7) for i in range(4)]


def test_the_dispersion_follows_how_far_a_tasks_groups_land_from_its_mean():
    cfg = SamplerConfig(type="difficulty", decay=1.0)
    steady, flipping = DifficultyTracker(scattered(False), cfg), DifficultyTracker(scattered(True), cfg)
    assert steady.dispersion("h", 7) > 8.0 > 1.0 > flipping.dispersion("h", 7)
    # alike groups: a task at 3 in 6 is a sure mix; flipping ones: a mix is rare whatever the mean
    assert steady.p_mixed("t1", "f", "h", 7, 6) > 0.9 > 0.3 > flipping.p_mixed("t1", "f", "h", 7, 6)
    pinned = DifficultyTracker(scattered(True), cfg.model_copy(update={"dispersion": 5.0}))
    mu = pinned.pass_rate("t1", "f", "h", 7)
    assert pinned.dispersion("h", 7) == 5.0
    assert pinned.p_mixed("t1", "f", "h", 7, 6) == pytest.approx(p_mixed(5 * mu, 5 * (1 - mu), 6))


def test_the_reports_causal_constant_is_the_mixed_share_of_the_steps_before():
    # picks of step 2 (one mixed of two), step 1 (both mixed), step 3 (one pick), out of order
    shares = causal_shares([(2, [True, False]), (1, [True, True]), (3, [False])])
    assert shares == pytest.approx([0.5, 0.5, 3 / 4, 3 / 4, 4 / 6])
