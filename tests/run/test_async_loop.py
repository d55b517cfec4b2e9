"""Asynchronous rollouts (loop.max_policy_lag): the next step's rollouts run while a step trains;
every trained token's lag is logged and bounded."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
from rich.console import Console

from harnessrl.engine import make_tiny_model
from harnessrl.config import load_config
from harnessrl.run.loop import limit_policy_lag, run_training

from .fakes import fake_collector_factory, fake_tasks


def test_limit_policy_lag_counts_and_drops_stale_tokens():
    decision = np.array([False, True, True, True, True])
    version = np.array([-1, 3, 2, 1, 3], dtype=np.int32)
    batch = SimpleNamespace(decision=decision.copy(), adv_pos=np.ones(5, np.float32),
                            adv_neg=np.zeros(5, np.float32), weight=np.ones(5, np.float32))
    tree = SimpleNamespace(flat=lambda: SimpleNamespace(policy_version=version))
    out = limit_policy_lag(batch, [tree], trainer_version=3, max_lag=1)
    assert out.policy_lag_tokens == {"0": 2.0, "1": 1.0, "2": 1.0}
    assert out.policy_lag_max == 2.0 and out.policy_lag_dropped == 1.0
    assert out.policy_lag_mean == pytest.approx(0.75)
    assert batch.decision.tolist() == [False, True, True, False, True]  # the lag-2 token left the loss
    assert batch.weight[3] == 0 and batch.adv_pos[3] == 0 and batch.weight[1] == 1


def test_async_run_bounds_lag_and_trains_every_step(tmp_path):
    tiny = make_tiny_model(tmp_path / "tiny", seed=3)
    ov = [f"model.path={tiny}", "engine.type=hf", f"output.run_dir={tmp_path / 'run'}", "output.tensorboard=false",
          "loop.steps=3", "loop.groups_per_step=2", "loop.n_per_group=3", "loop.eval_size=0",
          "serve.max_tokens=6", "filters.truncated=keep", "optimizer.lr=1e-3", "algorithm.token_budget=64",
          "loop.max_policy_lag=1"]
    res = run_training(load_config(None, ov), console=Console(quiet=True),
                       collector_factory=fake_collector_factory(), tasks_loader=fake_tasks)
    lines = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in lines] == [0, 1, 2, 3] and res.last_step == 3
    for r in lines[1:]:
        assert r["policy_version"] == r["step"]
        lags = {int(k) for k in r["policy_lag_tokens"]}
        assert lags <= {0, 1} and r["policy_lag_max"] <= 1 and r["policy_lag_dropped"] == 0
        assert sum(r["policy_lag_tokens"].values()) > 0
    assert set(lines[1]["policy_lag_tokens"]) == {"0"}  # step 1 was collected before any update
