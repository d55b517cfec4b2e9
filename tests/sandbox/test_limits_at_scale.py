"""Issue 12: misbehaving rollouts among normal ones, 16 at once, through the real runner in bwrap.

The scenario is benchmarks/sandbox_limits.py (its figures are in docs/benchmarks.md); here it runs
once with a short harness timeout and each rollout's recorded status is checked.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.modules import load_file

pytestmark = [
    pytest.mark.bwrap,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing: apt-get install bubblewrap"),
    pytest.mark.filterwarnings("ignore::harnessrl.sandbox.local.SandboxNotIsolatedWarning"),
]
SCENARIO = Path(__file__).resolve().parents[2] / "benchmarks" / "sandbox_limits.py"


def _scenario():
    return load_file("sandbox_limits", SCENARIO)


@pytest.mark.timeout(600)
def test_each_misbehaving_rollout_is_contained_and_recorded_as_its_own_status():
    from harnessrl.sandbox.cgroups import SandboxCgroups

    cg = SandboxCgroups.create(64, 16)
    if cg is None:
        pytest.skip("cgroups are not writable here: memory/process limits fall back to rlimits")
    cg.remove()
    out = _scenario().run_limits(normal=10, timeout_s=10.0)
    by_mode: dict[str, list[dict]] = {}
    for row in out["rollouts"]:
        by_mode.setdefault(row["mode"], []).append(row)
    assert len(out["rollouts"]) == 16
    normal = by_mode.pop("normal")
    assert [(r["status"], r["reward"], r["calls"]) for r in normal] == [("ok", 1.0, 1)] * 10
    got = {mode: (rows[0]["status"], tuple(rows[0]["limits"])) for mode, rows in by_mode.items()}
    assert got["forkbomb"] == ("harness_error", ("procs",))
    assert got["forkbomb-sh"][0] == "timeout" and "procs" in got["forkbomb-sh"][1]
    assert got["memhog"] == ("harness_error", ("memory",))
    assert got["diskfill"][0] == "harness_error" and "No space left" in by_mode["diskfill"][0]["error"]
    assert got["daemon"] == ("ok", ())
    assert got["hang"] == ("timeout", ())
    assert all(rows[0]["calls"] == 1 for rows in by_mode.values())  # each made its call first
    assert out["left_processes"] == []  # the daemon, the hung tree, the bombs' children: all gone
