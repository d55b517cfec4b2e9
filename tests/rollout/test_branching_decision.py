"""Whether a step branches is decided in one place, `BranchingConfig.enabled` (issue 40 item 3):
what depends on it (the borrowed prefix, the branch rollouts a group may add, the placement a step
records, the branch waves) reads that property or one built on it."""

from __future__ import annotations

import re
from pathlib import Path

import harnessrl
from harnessrl.rollout.branching import BranchingConfig, branch_plans

SRC = Path(harnessrl.__file__).resolve().parent


def test_a_step_without_branch_points_does_not_branch():
    off = BranchingConfig(points=0, width=3, borrow=True, placement="target")
    assert not off.enabled and not off.borrows
    assert off.rollouts_per_group == 0 and off.step_placement is None


def test_a_branching_step_reads_its_settings():
    on = BranchingConfig(points=2, width=3, placement="target")
    assert on.enabled and not on.borrows
    assert on.rollouts_per_group == 6 and on.step_placement == "target"
    assert BranchingConfig(points=1, borrow=True).borrows


def test_branch_plans_of_a_step_that_does_not_branch_read_nothing():
    class NoStore:
        def __getattr__(self, name: str) -> None:
            raise AssertionError(f"read the store ({name}) although the step does not branch")

    assert branch_plans(NoStore(), [object()], BranchingConfig(points=0)) == []  # type: ignore[list-item]


def test_only_the_branching_module_and_the_config_checks_read_enabled():
    """The step (run/) and the rest read the derived properties, not `.enabled` and the raw knobs
    side by side; the config's validators refuse settings that need branching."""
    allowed = {"rollout/branching.py", "config/sections.py", "config/schema.py", "run/step_groups.py"}
    pattern = re.compile(r"(branching|\bbr|\bcfg)\.enabled\b|\.points\s*\*|\.points\s*>")
    found = sorted(str(p.relative_to(SRC)) for p in SRC.rglob("*.py")
                   if pattern.search(p.read_text()) and str(p.relative_to(SRC)) not in allowed)
    assert found == []
    step = (SRC / "run" / "step_groups.py").read_text()
    assert len(re.findall(r"\bbr\.enabled\b|branching\.enabled\b", step)) == 1  # the step's branching summary
