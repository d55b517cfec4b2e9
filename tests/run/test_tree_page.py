"""The run's tree page (trees.html, and `harnessrl tree show --html` on the run) shows the
advantages the step trained: the same trees (the run's filters, the trained rewards) and the same
per-token advantages, for every estimator, including ppo (whose advantages depend on the critic
at that step) and grpo on `reward: pass` with `per_harness_norm`."""

from __future__ import annotations

import html
import re

import numpy as np
import pytest
from rich.console import Console

from harnessrl.engine import make_tiny_model
from harnessrl.run import loop
from harnessrl.config import load_config
from harnessrl.report.display import RunDisplay
from harnessrl.run.finish import write_last_trees
from harnessrl.run.loop import train_step
from harnessrl.run.open_run import close_run, open_run
from harnessrl.store import RunStore
from harnessrl.algo.views import write_tree_page
from harnessrl.tree.view_text import ids_decode

from .fakes import fake_collector_factory, fake_tasks

TOKEN = re.compile(r'<span class="tok" style="[^"]*" title="id=(\d+) pos=(\d+) logp=(\S+) [^"]*?(?: A=([-+]\d+\.\d+))?">')


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return make_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=5)


def partial_credit(ids: list[int]) -> float:
    """0, 0.25, 0.5 or 0.75 by the first sampled id: the fake tasks pass at >= 0.5, so the
    trained pass reward (0/1) differs from the stored score."""
    return (ids[0] % 4) / 4 if ids else 0.0


def page_trees(text: str) -> dict[tuple, np.ndarray]:
    """Per tree on the page: (id, pos, logp) of its sampled tokens -> the advantage each shows."""
    out = {}
    for section in text.split("<h2>group ")[1:]:
        toks = [m.groups() for m in TOKEN.finditer(html.unescape(section))]
        key = tuple((int(i), int(p), lp) for i, p, lp, _ in toks)
        out[key] = np.array([float(a) if a else np.nan for *_, a in toks])
    return out


@pytest.mark.parametrize("algorithm", [
    ["algorithm.name=grpo", "algorithm.reward=pass", "algorithm.per_harness_norm=true"],
    ["algorithm.name=ppo"],
    ["algorithm.name=tree_grpo", "algorithm.reward=pass"],
], ids=["grpo-pass-per-harness", "ppo", "tree_grpo-pass"])
def test_tree_page_shows_the_advantages_the_step_trained(tiny_dir, tmp_path, monkeypatch, algorithm):
    run_dir = tmp_path / "run"
    cfg = load_config(None, [
        f"model.path={tiny_dir}", "engine.type=hf", f"output.run_dir={run_dir}", "output.tensorboard=false",
        "loop.steps=1", "loop.groups_per_step=2", "loop.n_per_group=4", "loop.eval_size=0", "serve.max_tokens=5",
        "filters.truncated=keep", "algorithm.token_budget=64",
        "harnesses=[{name: builtin, weight: 1}, {name: mini-swe-agent, weight: 1}]", *algorithm])
    captured = []
    real_concat = loop.concat_batch

    def capture(flats, advs, **kw):
        captured.append((list(flats), list(advs)))
        return real_concat(flats, advs, **kw)

    monkeypatch.setattr(loop, "concat_batch", capture)
    parts = open_run(cfg, False, Console(quiet=True), fake_collector_factory(reward=partial_credit), fake_tasks)
    try:
        with RunDisplay(Console(quiet=True), 1, 1) as display:
            train_step(parts, 1, display)
        page = write_last_trees(parts, 1, Console(quiet=True))
    finally:
        close_run(parts)
    assert captured and captured[0][0], "the step trained no tree"
    trained = {}
    for flats, advs in captured:
        for flat, adv in zip(flats, advs):
            q = np.flatnonzero(flat.decision)
            key = tuple((int(flat.tokens[j]), int(flat.positions[j]), f"{float(flat.engine_logprobs[j]):.3f}")
                        for j in q)
            trained[key] = adv.adv_mean[q]
    assert page is not None
    with RunStore(run_dir) as store:  # `harnessrl tree show RUN --html` (default estimator) shows the same
        cli_page = tmp_path / "cli.html"
        write_tree_page(store, cli_page, "run", ids_decode, step=1)
    for text in (page.read_text(), cli_page.read_text()):
        shown = page_trees(text)
        assert set(shown) == set(trained), "the page shows other trees than the step trained"
        for key, adv in trained.items():
            np.testing.assert_allclose(shown[key], adv, atol=6e-4, equal_nan=True)
