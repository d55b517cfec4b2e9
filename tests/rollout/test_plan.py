"""Group plans: one id scheme for `harnessrl rollout`, `harnessrl eval` and the training loop;
ids are deterministic, and a new attempt on a run directory gets new ids."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

from harnessrl.rollout.difficulty import DifficultyTracker

from rich.console import Console

from harnessrl.app import proxy_session as session
from harnessrl.app import rollout as rollout_cli
from harnessrl.rollout import jobs
from harnessrl.rollout.plan import next_attempt, plan_cross, plan_eval, plan_step
from harnessrl.run.evaluate import evaluate
from harnessrl.config import load_config
from harnessrl.report.display import RunDisplay
from harnessrl.store import RunStore
from harnessrl.tasks import load_tasks

HARNESSES = ["builtin", "mini-swe-agent"]


def _cli_eval_plans(monkeypatch, run_dir, n: int) -> list:
    """The group plans `harnessrl eval` runs (engine, proxy and runner replaced by recorders)."""
    seen: list = []

    @contextlib.contextmanager
    def no_proxy(run_dir, **kwargs):
        with RunStore(run_dir) as store:
            yield object(), store

    def record(plans, **kwargs):
        seen.extend(plans)
        return []

    monkeypatch.setattr(session, "proxy_session", no_proxy)
    monkeypatch.setattr(jobs, "run_plans", record)
    flags = rollout_cli.ServeFlags(None, None, HARNESSES, 2, None, "hf", "local", None, None, 3, 60.0,
                                   None, None, None)
    rollout_cli._execute("builtin:test", rollout_cli._serving_config(flags), flags, n, run_dir, step=0,
                         split="eval", progress=False)
    return seen


def _loop_eval_plans(tmp_path, tasks: list, n: int) -> list:
    """The group plans the training loop's held-out eval runs at step 0 of a fresh run."""
    seen: list = []

    class Recorder:
        def run(self, plans, progress=None):
            seen.extend(plans)

    cfg = load_config(None, [f"loop.eval_size={len(tasks)}", f"loop.eval_samples={n}",
                             "harnesses=[{name: builtin}, {name: mini-swe-agent}]"])
    with RunStore(tmp_path / "train") as store:
        parts = SimpleNamespace(cfg=cfg, attempt=next_attempt(store), eval_sets={"test": tasks},
                                collector=Recorder(), store=store, tracker=DifficultyTracker(),
                                run_dir=tmp_path / "train")
        with RunDisplay(Console(quiet=True), 1, 1) as display:
            ev = evaluate(parts, 0, display)
            assert ev.pass_at_1 == {} and ev.sets == {"test": {}}  # nothing was recorded
    return seen


def test_eval_cli_and_training_eval_plan_the_same_groups(monkeypatch, tmp_path):
    tasks = load_tasks("builtin:test")
    from_cli = _cli_eval_plans(monkeypatch, tmp_path / "eval", n=2)
    from_loop = _loop_eval_plans(tmp_path, tasks, n=2)
    assert len(from_cli) == len(tasks) * len(HARNESSES)
    key = [(p.group_id, p.task.id, p.harness, p.n, p.step) for p in from_cli]
    assert key == [(p.group_id, p.task.id, p.harness, p.n, p.step) for p in from_loop]
    assert len({p.group_id for p in from_cli}) == len(from_cli)


def test_plans_are_deterministic_and_attempts_get_new_ids(tmp_path):
    tasks = load_tasks("builtin:train")
    weights = {"builtin": 2.0, "mini-swe-agent": 1.0}
    a = plan_step(3, 1, tasks, weights, n_groups=6, n_per_group=4, seed=0)
    assert a == plan_step(3, 1, tasks, weights, n_groups=6, n_per_group=4, seed=0)
    redo = plan_step(3, 2, tasks, weights, n_groups=6, n_per_group=4, seed=0)
    assert [(p.task.id, p.harness) for p in redo] == [(p.task.id, p.harness) for p in a]  # same work ...
    assert not {p.group_id for p in redo} & {p.group_id for p in a}  # ... never read into the redo
    assert [p.harness for p in a].count("builtin") == 4
    assert plan_eval(0, 1, tasks, HARNESSES, 3, 2) == plan_cross(tasks[:3], HARNESSES, 2, step=0, attempt=1,
                                                                  split="eval")
    with RunStore(tmp_path / "run") as store:
        assert [next_attempt(store) for _ in range(3)] == [1, 2, 3]
    job_ids = [j.rollout_id for j in a[0].jobs()]
    assert job_ids == [f"{a[0].group_id}:{i}" for i in range(4)]
