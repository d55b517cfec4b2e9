"""cluster.backend=ray on a local Ray cluster: 2 rollout workers (proxy + local sandbox + builtin
harness each), 1 engine replica actor (scripted policy), 1 trainer actor. One step's trees equal
the local backend's; the trainer actor's update equals the in-process one; weights reach the
engine actor as one object-store ref; the full loop runs with cluster.backend=ray."""

from __future__ import annotations

import warnings
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from tests.modules import load_file

ray = pytest.importorskip("ray")
torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.scale, pytest.mark.timeout(900)]

HERE = Path(__file__).resolve().parent


def _solver():
    return load_file("solver", HERE.parent / "rollout" / "solver.py")


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    from harnessrl.engine import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=3)


def _cfg(tiny_dir, run_dir, **extra):
    from harnessrl.config import load_config

    ov = [f"model.path={tiny_dir}", "engine.type=hf", "sandbox.type=local", "loop.max_turns=3",
          "loop.concurrency=2", f"output.run_dir={run_dir}", "output.tensorboard=false", "algorithm.token_budget=4096",
          "cluster.backend=ray", "cluster.ray.rollout_workers=2", "cluster.ray.worker_cpus=1"]
    return load_config(None, ov + [f"{k}={v}" for k, v in extra.items()])


def _trees(store, plans):
    from harnessrl.algo import grpo
    from harnessrl.rollout.groups import read_groups
    from harnessrl.tree.build import build_tree

    out = []
    for g in read_groups(store, plans):
        tree = build_tree(g.calls, g.rollouts)
        out.append((g, tree, grpo(tree, std=True)))
    return out


def test_one_step_trees_and_update_equal_local_backend(tiny_dir, tmp_path, cluster):
    from harnessrl.cluster.ray_engine import start_engines
    from harnessrl.cluster.ray_rollout import RayCollector
    from harnessrl.cluster.ray_trainer import start_trainer
    from harnessrl.engine import EngineConfig
    from harnessrl.render.renderer import Renderer
    from harnessrl.rollout.plan import GroupPlan
    from harnessrl.run.runner_collector import RunnerCollector
    from harnessrl.run.trainer_setup import build_trainer, load_policy, make_trainer, seed_everything
    from harnessrl.store import RunStore
    from harnessrl.tasks import load_tasks
    from harnessrl.train.batch import concat_batch

    warnings.simplefilter("ignore")
    cfg = _cfg(tiny_dir, tmp_path / "run")
    renderer = Renderer.from_pretrained(str(tiny_dir))
    tasks = [load_tasks(f"builtin:{f}:test")[0] for f in ("write_word", "copy_file", "csv_count_rows")]
    plans = [GroupPlan(f"s1-a1-g{i}", t, "builtin", 2, "train", 1) for i, t in enumerate(tasks)]
    solver = _solver().solver_engine(renderer, tasks, lambda t: t.family != "write_word")

    local_store = RunStore(tmp_path / "local")
    local = RunnerCollector(cfg, solver, local_store, Path(tiny_dir))
    try:
        local.run(plans)
    finally:
        local.close()
    local_trees = _trees(local_store, plans)

    script = _solver().solver_engine(renderer, tasks, lambda t: t.family != "write_word")._fn
    engine = start_engines(EngineConfig(type="scripted", script=script, eos_ids=tuple(renderer.stop_ids)), 1)
    ray_store = RunStore(tmp_path / "ray")
    collector = RayCollector(partial(RunnerCollector, cfg, model_dir=Path(tiny_dir)), engine, ray_store, workers=2)
    trainer = None
    try:
        collector.run(plans)
        ray_trees = _trees(ray_store, plans)
        # every worker ran groups and kept its own shard on its node
        shards = sorted(p.name for p in (tmp_path / "ray" / "shards").iterdir())
        assert shards == ["worker-0", "worker-1"]
        assert len(local_trees) == len(ray_trees) == 3
        for (lg, lt, la), (rg, rt, ra) in zip(local_trees, ray_trees):
            assert [(r.rollout_id, r.status, r.reward) for r in lg.rollouts] == \
                   [(r.rollout_id, r.status, r.reward) for r in rg.rollouts]
            lf, rf = lt.flat(), rt.flat()
            for field in ("tokens", "parent_index", "decision", "engine_logprobs"):
                assert np.array_equal(np.asarray(getattr(lf, field)), np.asarray(getattr(rf, field)),
                                      equal_nan=True), field
            assert np.allclose(la.adv_pos, ra.adv_pos) and np.allclose(la.weight_sum, ra.weight_sum)
        assert {r.reward for g, _, _ in ray_trees for r in g.rollouts} == {0.0, 1.0}

        # the trainer actor's step equals the in-process step on the same batch
        batch = concat_batch([t.flat() for _, t, _ in ray_trees], [a for _, _, a in ray_trees])
        seed_everything(0)
        here = build_trainer(cfg, load_policy(cfg, Path(tiny_dir)), Path(tiny_dir)).update(batch)
        trainer = start_trainer(partial(make_trainer, cfg, Path(tiny_dir), Path(tiny_dir), None, seed=0))
        there = trainer.update(batch)
        assert there.loss == pytest.approx(here.loss, rel=1e-4, abs=1e-6)
        assert there.tokens_trained == here.tokens_trained > 0
        trainer.sync_weights(engine, 1)  # trainer actor -> object store -> engine actor
        assert engine.policy_version == 1
    finally:
        collector.close()
        engine.close()
        if trainer is not None:
            trainer.close()
        ray_store.close()
        local_store.close()


def test_training_run_on_ray_backend(tiny_dir, tmp_path, cluster):
    from rich.console import Console

    from harnessrl.run.loop import run_training

    warnings.simplefilter("ignore")
    cfg = _cfg(tiny_dir, tmp_path / "run", **{
        "loop.steps": 1, "loop.groups_per_step": 2, "loop.n_per_group": 2, "loop.eval_size": 0,
        "serve.max_tokens": 8, "engine.max_batch": 4, "tasks.families": "[copy_file, write_word]"})
    res = run_training(cfg, console=Console(quiet=True))
    assert res.last_step == 1
    rec = res.records[-1]
    assert rec["policy_version"] == 1 and rec["groups"] == 2.0
    assert sum(rec["rollouts"].values()) == 4.0
    assert (tmp_path / "run" / "checkpoints" / "step_000001" / "policy" / "config.json").is_file()
    assert len(list((tmp_path / "run" / "shards").iterdir())) == 2
