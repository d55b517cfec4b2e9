"""Group plans: which tasks and harnesses run, as groups of n rollouts, under which ids.

One group is one task run n times by one harness. Every way of running rollouts plans its groups
here, so `harnessrl rollout`, `harnessrl eval` and the training loop name groups the same way:

    train   s{step}-a{attempt}-g{index}                    plan_step: tasks and harnesses drawn per step
    other   {split}-s{step}-a{attempt}-{harness}-{index}   plan_cross / plan_eval: every task x harness

`{harness}` is `harness_tag(spec)`: the spec of a named harness, `cmd-<program>-<hash>` for a
`command:` template (never the template itself).

Ids are a pure function of the plan's inputs (no random part), so planning twice gives the same ids.
The attempt (how many times a process has started on this run directory, `next_attempt`) is part
of the id: the rollouts of an interrupted attempt are never read back into a redo of the same step.
The train plan is deterministic in (seed, step), so a redone step runs the same tasks and harnesses;
harnesses share the groups of a step in proportion to their weights (largest remainder). With a
task weight (`loop.sampler: difficulty`, rollout/difficulty.py) each harness slot draws its task
with probability proportional to the weight; the weights are a function of the steps before, so
the plan stays deterministic. `loop.sampler.family_weights` rescales the weights so that each
family of tasks gets its share of the draws (`family_balanced`). Replacement groups of a step
(`loop.dynamic_sampling`, run/step_groups.py) continue the step's group indices (`plan_more`).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from harnessrl.rollout.difficulty import task_family

if TYPE_CHECKING:
    from harnessrl.store.run_store import RunStore
    from harnessrl.tasks.model import Task

ATTEMPT_KEY = "attempt"  # run-store meta: the number of the latest attempt on the run directory
TaskWeight = Callable[[Any, str], float]  # (task, harness) -> sampling weight > 0


@dataclass(frozen=True)
class Branch:
    """A branch of a recorded rollout: the proxy answers the first `branch_call` served calls of
    `parent` again (the same ids), then the branch samples call `branch_call` fresh
    (rollout/branching.py; the proxy's replay, proxy/replay.py)."""

    parent: str
    branch_call: int


@dataclass(frozen=True)
class RolloutJob:
    """One rollout of a group: the unit the job runner executes."""

    task: Task
    harness_spec: str
    group_id: str
    sample_idx: int
    branch: Branch | None = None  # a replayed branch of a rollout of the same group

    @property
    def rollout_id(self) -> str:
        return f"{self.group_id}:{self.sample_idx}"


@dataclass(frozen=True)
class GroupPlan:
    group_id: str
    task: Task
    harness: str
    n: int
    split: str
    step: int
    # a wave of branches of this group's rollouts (n == len(branches)), sample indices from `first`
    branches: tuple[Branch, ...] = ()
    first: int = 0

    def jobs(self) -> list[RolloutJob]:
        if self.branches:
            return [RolloutJob(self.task, self.harness, self.group_id, self.first + i, b)
                    for i, b in enumerate(self.branches)]
        return [RolloutJob(self.task, self.harness, self.group_id, self.first + i) for i in range(self.n)]


def next_attempt(store: RunStore) -> int:
    """Count one more attempt on the run store and return its number (1 for a fresh directory)."""
    attempt = int(store.get_meta(ATTEMPT_KEY, 0)) + 1
    store.set_meta(ATTEMPT_KEY, attempt)
    return attempt


def harness_counts(weights: dict[str, float], n_groups: int) -> dict[str, int]:
    """Groups per harness proportional to weight; remainders go to the largest fractions."""
    total = sum(weights.values())
    exact = {h: n_groups * w / total for h, w in weights.items()}
    counts = {h: int(x) for h, x in exact.items()}
    left = n_groups - sum(counts.values())
    for h in sorted(exact, key=lambda h: (exact[h] - counts[h], h), reverse=True)[:left]:
        counts[h] += 1
    return counts


def plan_step(step: int, attempt: int, tasks: Sequence[Any], weights: dict[str, float], n_groups: int,
              n_per_group: int, seed: int, task_weight: TaskWeight | None = None) -> list[GroupPlan]:
    """The groups of a training step (same tasks and harnesses for every attempt of the step);
    `task_weight` None: every task alike (each once before any twice)."""
    if not tasks:
        raise ValueError("no training tasks to plan from")
    rng = random.Random(seed * 1_000_003 + step)
    per_harness = harness_counts(weights, n_groups)
    harnesses = [h for h, c in per_harness.items() for _ in range(c)]
    rng.shuffle(harnesses)
    if task_weight is None:
        order = list(range(len(tasks)))
        rng.shuffle(order)
        picks = [tasks[order[i % len(order)]] for i in range(n_groups)]
    else:
        picks = weighted_picks(rng, tasks, harnesses, task_weight)
    return [GroupPlan(f"s{step}-a{attempt}-g{i}", t, h, n_per_group, "train", step)
            for i, (t, h) in enumerate(zip(picks, harnesses))]


def family_balanced(weight: TaskWeight, tasks: Sequence[Any], family_weights: Mapping[str, float],
                    family_of: Callable[[Any], str]) -> TaskWeight:
    """`weight` rescaled so that, for each harness, the tasks of a family together weigh that
    family's weight (1 when not listed): a draw picks a family by its weight, then a task of it by
    `weight`, however many tasks each family has (`loop.sampler.family_weights`)."""
    members: dict[str, list[Any]] = {}
    for t in tasks:
        members.setdefault(family_of(t), []).append(t)
    totals: dict[tuple[str, str], float] = {}

    def balanced(task: Any, harness: str) -> float:
        family = family_of(task)
        if (family, harness) not in totals:
            totals[(family, harness)] = sum(weight(t, harness) for t in members.get(family, ()))
        total = totals[(family, harness)]
        return weight(task, harness) * family_weights.get(family, 1.0) / total if total > 0 else 0.0

    return balanced


def weight_group(family_weights: Mapping[str, float]) -> Callable[[Any], str]:
    """The share a task is drawn under: its family when `family_weights` names it, else its category
    when that is named (as `tasks.families` matches either), else its family."""
    def group(task: Any) -> str:
        family, category = task_family(task), str(getattr(task, "category", "") or "")
        return category if family not in family_weights and category in family_weights else family

    return group


def weighted_picks(rng: random.Random, tasks: Sequence[Any], harnesses: Sequence[str], task_weight: TaskWeight,
                   exclude: Sequence[str] = ()) -> list[Any]:
    """One task per harness slot, drawn with probability proportional to its weight for that
    harness, without repeats (ids in `exclude` count as used) until every task is used."""
    used = set(exclude)
    out = []
    for h in harnesses:
        pool = [t for t in tasks if t.id not in used]
        if not pool:
            used, pool = set(), list(tasks)
        pick = rng.choices(pool, weights=[task_weight(t, h) for t in pool])[0]
        used.add(pick.id)
        out.append(pick)
    return out


def best_picks(tasks: Sequence[Any], harnesses: Sequence[str], task_weight: TaskWeight,
               exclude: Sequence[str] = ()) -> list[tuple[Any, str]]:
    """(task, harness) per harness slot: the unused task of the highest weight > 0 for that harness
    (the first in `tasks` order on a tie); a slot with no such task is left out."""
    used = set(exclude)
    out = []
    for h in harnesses:
        scored = [(task_weight(t, h), -i, t) for i, t in enumerate(tasks) if t.id not in used]
        best = max(scored, key=lambda x: (x[0], x[1]), default=None)
        if best is None or best[0] <= 0:
            continue
        used.add(best[2].id)
        out.append((best[2], h))
    return out


def plan_more(step: int, attempt: int, tasks: Sequence[Any], harnesses: Sequence[str], first_index: int,
              n_per_group: int, seed: int, task_weight: TaskWeight | None = None,
              exclude: Sequence[str] = (), best: bool = False) -> list[GroupPlan]:
    """More groups of a training step, one per harness in `harnesses` (replacements of groups
    that came back uniform): ids g{first_index}, g{first_index + 1}, ...; tasks drawn as
    `plan_step` draws them, those in `exclude` (the step's tasks so far) last; `best`: the task of
    the highest weight instead (`best_picks`: none twice in a step, none of weight 0)."""
    if not tasks:
        raise ValueError("no training tasks to plan from")
    if best:
        pairs = best_picks(tasks, harnesses, task_weight or (lambda t, h: 1.0), exclude)
    else:
        rng = random.Random((seed * 1_000_003 + step) * 31 + first_index)
        pairs = list(zip(weighted_picks(rng, tasks, harnesses, task_weight or (lambda t, h: 1.0), exclude),
                         harnesses))
    return [GroupPlan(f"s{step}-a{attempt}-g{first_index + i}", t, h, n_per_group, "train", step)
            for i, (t, h) in enumerate(pairs)]


def plan_cross(tasks: Sequence[Any], harnesses: Sequence[str], n: int, *, step: int, attempt: int,
               split: str) -> list[GroupPlan]:
    """Every task with every harness, n rollouts each (harness by harness, tasks in the given order)."""
    if n < 1:
        raise ValueError(f"n (samples per group) must be >= 1, got {n}")
    return [GroupPlan(f"{split}-s{step}-a{attempt}-{harness_tag(h)}-{i}", t, h, n, split, step)
            for h in harnesses for i, t in enumerate(tasks)]


ID_SAFE = re.compile(r"[^A-Za-z0-9_.:-]+")


def harness_tag(spec: str) -> str:
    """The harness's name in ids: the spec itself for named harnesses (`codex:small`); for
    `command:<template>`, `cmd-<program>-<hash>`: the program the template runs (its first word
    after env assignments, `env` and a path) and 6 hex of the template, so two templates of one
    program get distinct ids and a template's quoting or JSON never lands in an id. A
    `command[name=<name>,...]:<template>` spec is `<name>` (harness/command.py)."""
    if not spec.startswith(("command:", "command[")):
        return ID_SAFE.sub("_", spec)
    import hashlib
    import shlex

    from harnessrl.harness.command import split_command_spec

    options, template = split_command_spec(spec)
    if options.get("name"):
        return ID_SAFE.sub("_", str(options["name"]))
    hashed = template if spec.startswith("command:") else spec  # options (ro, rw, ...) count too
    try:
        words = shlex.split(template)
    except ValueError:  # unbalanced quotes: the template fails later, with its own message
        words = template.split()
    program = next((w for w in words if w != "env" and not re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", w)), "sh")
    name = ID_SAFE.sub("_", program.rsplit("/", 1)[-1])[:24] or "sh"
    return f"cmd-{name}-{hashlib.blake2b(hashed.encode(), digest_size=3).hexdigest()}"


def plan_eval(step: int, attempt: int, tasks: Sequence[Any], harnesses: Sequence[str], size: int,
              samples: int = 1, label: str = "") -> list[GroupPlan]:
    """Held-out pass@1: the first `size` eval tasks (a fixed set), `samples` times per harness.
    `harnessrl eval` plans with this too, so its groups are the in-training eval's groups. `label`
    names an eval set in the group ids (eval-<label>-s...) when several sets run at one step."""
    plans = plan_cross(list(tasks)[:size], harnesses, samples, step=step, attempt=attempt, split="eval")
    if not label:
        return plans
    tag = set_tag(label)
    return [replace(p, group_id=f"eval-{tag}-{p.group_id[len('eval-'):]}") for p in plans]


def set_tag(name: str) -> str:
    """An eval set's label in group ids: its name with each run of characters other than
    [A-Za-z0-9_] as `_` (builtin:chain:test -> builtin_chain_test)."""
    return re.sub(r"[^A-Za-z0-9_]+", "_", name)
