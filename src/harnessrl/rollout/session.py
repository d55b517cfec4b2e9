"""What `harnessrl rollout` / `harnessrl eval` set up around the runner: the run store, and either
an in-process proxy over a fresh engine or a link to a proxy already running."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Iterator

from harnessrl.rollout.proxy_link import LocalProxy, RemoteProxy


@contextlib.contextmanager
def proxy_session(run_dir: Path, *, engine: str = "hf", model: str | None = None, proxy_url: str | None = None,
                  admin_token: str | None = None, max_model_len: int | None = None,
                  max_tokens: int = 512, tool_format: str | None = None,
                  default_temperature: float = 1.0) -> Iterator[tuple[Any, Any]]:
    """Yields (proxy link, RunStore). Starts engine + proxy in-process unless `proxy_url` is given.
    ``tool_format``: the in-process renderer's tool format (a running proxy keeps its own)."""
    from harnessrl.store import RunStore

    store = RunStore(run_dir)
    try:
        if proxy_url:
            if not admin_token:
                raise ValueError("--proxy needs --admin-token (printed by `harnessrl serve`)")
            yield RemoteProxy(proxy_url, admin_token).check(), store
            return
        from harnessrl.engine import EngineConfig, make_engine, resolve_model
        from harnessrl.proxy.server import ProxyServer
        from harnessrl.render.renderer import Renderer

        model_dir = resolve_model(model)
        renderer = Renderer.from_pretrained(model_dir, tool_format=tool_format)
        eng = make_engine(EngineConfig(type=engine, model=str(model_dir), max_model_len=max_model_len))
        server = None
        try:
            server = ProxyServer(eng, store, renderer, default_max_tokens=max_tokens,
                                 max_tokens_cap=max_tokens, default_temperature=default_temperature).start()
            yield LocalProxy(server), store
        finally:
            if server is not None:
                server.stop()
            eng.close()
    finally:
        store.close()
