"""The runner's warm pool (rollout/jobs.py WarmStarts): each pooled sandbox is made for one
rollout with a key of its own; a sandbox that no rollout took is destroyed and its key closed when
the batch ends, so no key outlives its batch. The local backend: no bwrap needed (the bwrap attack
test is tests/sandbox/test_warm_pool_isolation.py)."""

from __future__ import annotations

import time

from harnessrl.harness import make_harness
from harnessrl.rollout.jobs import RunOptions, WarmStarts
from harnessrl.rollout.plan import RolloutJob
from harnessrl.sandbox import SandboxConfig
from harnessrl.tasks.model import Task, Verifier


class FakeLink:
    port = 1
    served_model = "m"

    def __init__(self) -> None:
        self.open: dict[str, str] = {}
        self.registered: list[tuple[str, int | None]] = []

    def register(self, rollout_id: str, max_calls: int | None = None, **kw: object) -> str:
        key = f"key-{len(self.registered)}"
        self.registered.append((rollout_id, max_calls))
        self.open[key] = rollout_id
        return key

    def close(self, key: str) -> None:
        self.open.pop(key, None)


def test_untaken_pooled_sandboxes_are_destroyed_and_their_keys_closed():
    task = Task(id="w", instruction="x", files={"in.txt": b"x\n"}, verifier=Verifier("checks", "true"))
    spec = "command:true"
    adapter = make_harness(spec)
    opts = RunOptions(sandbox_cfg=SandboxConfig(type="local"), max_turns=5)
    work = [(RolloutJob(task, spec, "g", i), opts) for i in range(4)]
    link = FakeLink()
    warm = WarmStarts(work, {spec: adapter}, link, depth=2)
    deadline = time.monotonic() + 30
    while len(link.registered) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    first = warm.take("g:0")
    assert first is not None and link.open[first.key] == "g:0"
    assert (first.sandbox.workspace / "in.txt").read_bytes() == b"x\n"  # the task's workspace is in
    assert warm.take("g:0") is None  # once
    while len(link.registered) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    made = [rid for rid, _ in link.registered]
    warm.close()
    assert link.open == {first.key: "g:0"}  # every other key is closed with its sandbox
    assert made[:3] == ["g:0", "g:1", "g:2"] and all(b == 5 for _, b in link.registered)  # the run's budget
    assert warm.take("g:1") is None  # nothing is handed out after close
    assert first.sandbox.alive  # the taken one is its rollout's to destroy
    first.sandbox.destroy()
