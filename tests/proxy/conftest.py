"""Fixtures: the real SmolLM2 tokenizer + renderer, a scripted engine, a real proxy on loopback."""

from __future__ import annotations

import pytest

from harnessrl.proxy.server import ProxyServer
from harnessrl.store import RunStore

from .fakes import TextScriptEngine


@pytest.fixture(scope="session")
def renderer():
    from harnessrl.engine.model import smollm2_tokenizer_dir
    from harnessrl.render.renderer import Renderer

    return Renderer.from_pretrained(smollm2_tokenizer_dir())


@pytest.fixture
def engine(renderer):
    return TextScriptEngine(renderer.encode, renderer.eot_id)


@pytest.fixture
def store(tmp_path):
    s = RunStore(tmp_path / "run")
    yield s
    s.close()


@pytest.fixture
def proxy(engine, store, renderer):
    server = ProxyServer(engine, store, renderer, max_body_bytes=2 * 1024 * 1024).start()
    yield server
    server.stop()
