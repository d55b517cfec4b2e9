"""Trees of a run directory: read rollouts and calls through ``RunStore`` and build one tree per group."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from harnessrl.store.records import CallRecord, RolloutRecord
from harnessrl.tree.build import build_tree
from harnessrl.tree.filters import FilterConfig
from harnessrl.tree.nodes import PrefixTree


class RunNotFound(FileNotFoundError):
    """The run directory has no call store."""


@dataclass(frozen=True)
class Group:
    group_id: str
    task_id: str
    rollouts: list[RolloutRecord]


def group_rollouts(rollouts: Sequence[RolloutRecord], task: str | None = None,
                   group: str | None = None) -> list[Group]:
    """Rollouts grouped by group_id (first-seen order), optionally only one task / group."""
    groups: dict[str, list[RolloutRecord]] = {}
    for r in rollouts:
        if (task is None or r.task_id == task) and (group is None or r.group_id == group):
            groups.setdefault(r.group_id, []).append(r)
    out = []
    for gid, members in groups.items():
        members = sorted(members, key=lambda r: (r.sample_idx, r.rollout_id))
        out.append(Group(group_id=gid, task_id=members[0].task_id, rollouts=members))
    return out


def open_store(run_dir: str | Path):
    """The run's RunStore; RunNotFound (with the fix) if the directory holds no store."""
    from harnessrl.store.run_store import RunStore
    from harnessrl.store.schema import DB_NAME

    path = Path(run_dir)
    if not (path / DB_NAME).is_file():
        raise RunNotFound(f"{path} is not a run directory (no {DB_NAME}); pass the --run-dir of a "
                          f"`harnessrl serve` / `harnessrl rollout` / `harnessrl train` run")
    return RunStore(path)


def iter_group_trees(store, task: str | None = None, group: str | None = None, step: int | None = None,
                     filters: FilterConfig | None = None) -> Iterator[tuple[Group, list[CallRecord], PrefixTree]]:
    """(group, its calls, its tree) for every group of the run matching task / group / step."""
    for g in group_rollouts(store.list_rollouts(step=step), task, group):
        calls = store.list_calls(rollout_ids=[r.rollout_id for r in g.rollouts], as_arrays=True)
        yield g, calls, build_tree(calls, g.rollouts, filters)
