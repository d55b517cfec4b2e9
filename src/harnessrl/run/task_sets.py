"""The task sets of a run: the train split and the held-out eval sets its config names."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from harnessrl.run.errors import TrainError
from harnessrl.rollout.plan import weight_group
from harnessrl.tasks.loader import interleave_families, load_tasks
from harnessrl.tasks.model import Task, TaskError

if TYPE_CHECKING:
    from harnessrl.config import RunConfig
    from harnessrl.config.sections import ColdStartSection


def default_tasks(cfg: RunConfig) -> tuple[list[Task], dict[str, list[Task]]]:
    """(train tasks, {eval set name: tasks}): `tasks.suite` is "builtin" or a task directory;
    `tasks.families` filters the train split and every eval set but `unseen` (see TasksSection)."""
    t = cfg.tasks
    keep = set(t.families or ())

    def kept(tasks: list[Task], name: str) -> list[Task]:
        if not keep or name in ("unseen", "builtin:unseen"):
            return tasks
        return [x for x in tasks if x.family in keep or x.category in keep]

    try:
        if t.suite == "builtin":
            def load(name: str) -> list[Task]:
                return load_tasks(name if name.startswith("builtin:") else f"builtin:{name}")
        else:
            everything = load_tasks(t.suite)

            def load(name: str) -> list[Task]:
                return [x for x in everything if x.split == name]
        train = [x for name in t.train_splits() for x in kept(load(name), name)]
        evals = {name: interleave_families(kept(load(name), name)) for name in t.eval_set_names()}
    except TaskError as err:
        raise TrainError(f"tasks: {err}") from err
    dupes = sorted(i for i, n in Counter(x.id for x in train).items() if n > 1)
    if dupes:
        raise TrainError(f"tasks.train_split {t.train_splits()} lists tasks twice: {dupes[:5]}")
    if not train:
        raise TrainError(f"no training tasks for tasks={t.model_dump()}; check tasks.families / tasks.suite")
    overlap = {x.id for x in train} & {x.id for ts in evals.values() for x in ts}
    if overlap:
        raise TrainError(f"eval sets share tasks with the train split: {sorted(overlap)[:5]}")
    return train, evals


def demonstrated_tasks(section: ColdStartSection) -> list[Task]:
    """The tasks a cold start demonstrates: the first `limit` of each of its selectors."""
    try:
        return [t for selector in section.tasks for t in load_tasks(selector)[:section.limit]]
    except TaskError as err:
        raise TrainError(f"cold_start.tasks: {err}") from err


def without_demonstrated(train: list[Task], section: ColdStartSection) -> list[Task]:
    """The train split less the cold start's tasks (unless `train_demonstrated`); a TrainError when
    nothing would be left."""
    if not section.enabled or section.train_demonstrated:
        return train
    shown = {t.id for t in demonstrated_tasks(section)}
    kept = [t for t in train if t.id not in shown]
    if not kept:
        raise TrainError(f"every training task is one of cold_start.tasks {section.tasks}: RL would train on "
                         "demonstrated tasks only; lower cold_start.limit or set cold_start.train_demonstrated=true")
    return kept


def check_family_weights(train: list[Task], family_weights: dict[str, float]) -> None:
    """A TrainError when `loop.sampler.family_weights` names a family (or category) the train split
    lacks, or leaves every family of it at weight 0."""
    if not family_weights:
        return
    present = sorted({t.family for t in train} | {t.category for t in train if t.category})
    unknown = sorted(set(family_weights) - set(present))
    if unknown:
        raise TrainError(f"loop.sampler.family_weights names {unknown}, not a family or category of the train split; "
                         f"its families and categories: {present}")
    group = weight_group(family_weights)
    if not any(family_weights.get(group(t), 1.0) > 0 for t in train):
        raise TrainError(f"loop.sampler.family_weights gives every family of the train split weight 0: {present}")
