"""Token-identical GRPO groups are warned about once per run (rollout/sample_check.py)."""

from __future__ import annotations

from harnessrl.rollout.jobs import run_groups
from harnessrl.rollout.sample_check import SampleCheck, identical_samples
from harnessrl.sandbox.base import SandboxConfig
from tests.support.synthetic import make_call


def test_identical_samples_needs_two_served_rollouts_with_the_same_ids():
    a = [make_call("a", 0, [1, 2], [3, 4]), make_call("a", 1, [1, 2, 3, 4, 5], [6])]
    b = [make_call("b", 0, [1, 2], [3, 4]), make_call("b", 1, [1, 2, 3, 4, 5], [6])]
    c = [make_call("c", 0, [1, 2], [3, 9])]
    assert identical_samples([a, b]) and not identical_samples([a, c]) and not identical_samples([a])
    assert not identical_samples([a, [make_call("d", 0, [1], [], status="error")]])


def test_a_deterministic_policy_group_warns_once(proxy, store, tasks, capsys):
    """The scripted solver samples the same tokens every time: a GRPO group with no signal."""
    run_groups(tasks[1:], ["builtin"], 2, proxy=proxy, store=store, sandbox_cfg=SandboxConfig(type="local"),
               max_turns=3, progress=False)
    err = capsys.readouterr().err
    assert err.count("token-identical") == 1 and "temperature_mode: force" in err
    seen: list[str] = []
    check = SampleCheck(seen.append)
    groups = [(r.group_id, [r.rollout_id for r in store.list_rollouts()]) for r in store.list_rollouts()[:1]]
    check.check(store, groups)
    check.check(store, groups)
    assert len(seen) == 1  # once per run
