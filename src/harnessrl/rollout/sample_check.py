"""GRPO needs different samples in a group: a group whose rollouts all sampled the same tokens has
zero advantage everywhere and trains nothing. That happens when a harness sends temperature 0
(aider) or the policy has collapsed. `SampleCheck` warns once per run when it first sees such a
group, with the fix (serve.temperature_mode: force)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from harnessrl.store.records import CallRecord

if TYPE_CHECKING:
    from harnessrl.store.run_store import RunStore


def identical_samples(calls_by_rollout: Sequence[Sequence[CallRecord]]) -> bool:
    """Whether every rollout (at least 2, each with a served call) sampled exactly the same ids in
    the same calls: the group's samples are token-identical."""
    seqs = [tuple(tuple(c.sampled_ids) for c in sorted(calls, key=lambda c: c.seq) if c.status == "ok")
            for calls in calls_by_rollout]
    seqs = [s for s in seqs if s]
    return len(seqs) >= 2 and len(set(seqs)) == 1


class SampleCheck:
    """Warns (through `warn`) the first time a group of the run has token-identical samples."""

    def __init__(self, warn: Callable[[str], None]):
        self.warn = warn
        self.warned = False

    def check(self, store: RunStore, groups: Sequence[tuple[str, Sequence[str]]]) -> None:
        """`groups`: (group id, its rollout ids); reads their calls from `store` until one warns."""
        if self.warned:
            return
        for group_id, rollout_ids in groups:
            if len(rollout_ids) < 2:
                continue
            calls = store.list_calls(list(rollout_ids))
            by_rollout = [[c for c in calls if c.rollout_id == r] for r in rollout_ids]
            if identical_samples(by_rollout):
                temps = sorted({c.temperature for c in calls if c.status == "ok"})
                self.warn(f"group {group_id}: all {len(rollout_ids)} samples are token-identical (sampled at "
                          f"temperature {', '.join(f'{t:g}' for t in temps)}), so GRPO gets no signal from it. "
                          "If the harness sends its own temperature (aider sends 0), set "
                          "serve.temperature_mode: force (--temperature-mode force). Shown once per run.")
                self.warned = True
                return
