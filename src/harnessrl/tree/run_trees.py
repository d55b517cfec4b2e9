"""Trees of a run directory: read groups through ``store.groups`` and build one tree per group."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from harnessrl.errors import HarnessRLError
from harnessrl.store.groups import StoredGroup, drop_abandoned_attempts, group_calls, group_rollouts
from harnessrl.store.records import CallRecord, RolloutRecord
from harnessrl.tree.build import build_tree
from harnessrl.tree.filters import FilterConfig
from harnessrl.tree.nodes import PrefixTree

if TYPE_CHECKING:
    from harnessrl.store.run_store import RunStore


class RunNotFound(HarnessRLError, FileNotFoundError):
    """The run directory has no call store."""


__all__ = ["RunNotFound", "group_rollouts", "iter_group_trees", "open_store", "rebuild_trees", "run_rollouts"]


def run_rollouts(store: RunStore, step: int | None = None, group: str | None = None) -> list[RolloutRecord]:
    """The run's rollouts (of one step), less the abandoned attempts of steps a resumed training
    run redid (only the last attempt trained; see store.groups.drop_abandoned_attempts). Kept
    whole when a group is asked for by id, and for runs without training steps."""
    rollouts = store.list_rollouts(step=step)
    if group is None and store.list_steps():
        rollouts = drop_abandoned_attempts(rollouts)
    return rollouts


def open_store(run_dir: str | Path) -> RunStore:
    """The run's RunStore; RunNotFound (with the fix) if the directory holds no store."""
    from harnessrl.store.run_store import RunStore
    from harnessrl.store.schema import DB_NAME

    path = Path(run_dir)
    if not (path / DB_NAME).is_file():
        raise RunNotFound(f"{path} is not a run directory (no {DB_NAME}); pass the --run-dir of a "
                          f"`harnessrl serve` / `harnessrl rollout` / `harnessrl train` run")
    return RunStore(path)


def iter_group_trees(store: RunStore, task: str | None = None, group: str | None = None, step: int | None = None,
                     filters: FilterConfig | None = None) -> Iterator[tuple[StoredGroup, list[CallRecord], PrefixTree]]:
    """(group, its calls, its tree) for every group of the run matching task / group / step."""
    for g in group_rollouts(run_rollouts(store, step, group), task, group):
        calls = group_calls(store, g.rollouts, as_arrays=True)
        yield g, calls, build_tree(calls, g.rollouts, filters)


def rebuild_trees(store: RunStore, step: int, rewards: Mapping[str, Mapping[str, float | None]],
                  filters: FilterConfig) -> Iterator[tuple[str, PrefixTree]]:
    """(group id, tree) for the groups of `step` named in `rewards` (group id -> rollout id -> the
    reward it trained on), built as the training step built them: the same calls, those rewards
    and the step's filters."""
    for g in group_rollouts(store.list_rollouts(step=step)):
        if g.group_id not in rewards:
            continue
        trained = rewards[g.group_id]
        rollouts = [replace(r, reward=trained.get(r.rollout_id, r.reward)) for r in g.rollouts]
        yield g.group_id, build_tree(group_calls(store, rollouts, as_arrays=True), rollouts, filters)
