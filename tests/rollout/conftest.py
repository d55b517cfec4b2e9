"""Fixtures: the real SmolLM2 tokenizer/renderer, a run store, and a real proxy over a scripted
policy that solves built-in tasks with their reference solutions."""

from __future__ import annotations

import warnings

import pytest

from harnessrl.proxy.server import ProxyServer
from harnessrl.store import RunStore
from harnessrl.tasks import load_tasks

from .solver import solver_engine


@pytest.fixture(autouse=True)
def _quiet_local_sandbox():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


@pytest.fixture(scope="session")
def renderer():
    from harnessrl.engine.model import smollm2_tokenizer_dir
    from harnessrl.render.renderer import Renderer

    return Renderer.from_pretrained(smollm2_tokenizer_dir())


@pytest.fixture
def store(tmp_path):
    s = RunStore(tmp_path / "run")
    yield s
    s.close()


@pytest.fixture
def tasks():
    """Held-out tasks of two categories (write_word is the one the scripted policy fails)."""
    return [load_tasks("builtin:write_word:test")[0], load_tasks("builtin:csv_sum:unseen")[0]]


@pytest.fixture
def proxy(renderer, store, tasks):
    """Solves every task but write_word (whose rollouts answer without a command)."""
    engine = solver_engine(renderer, tasks, lambda t: t.family != "write_word")
    server = ProxyServer(engine, store, renderer).start()
    yield server
    server.stop()
