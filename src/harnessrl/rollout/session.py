"""What `harnessrl rollout` / `harnessrl eval` set up around the runner: the run store, and either
an in-process proxy (started by the caller's `local`) or a link to a proxy already running."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterator

from harnessrl.rollout.proxy_link import RemoteProxy

LocalStart = Callable[[Any], ContextManager[Any]]  # store -> context yielding a started LocalProxy


@contextlib.contextmanager
def proxy_session(run_dir: Path, *, local: LocalStart, proxy_url: str | None = None,
                  admin_token: str | None = None) -> Iterator[tuple[Any, Any]]:
    """Yields (proxy link, RunStore). Enters `local(store)` (engine + proxy in this process) unless
    `proxy_url` is given; a running proxy keeps its own engine, tool format and sampling."""
    from harnessrl.store import RunStore

    store = RunStore(run_dir)
    try:
        if proxy_url:
            if not admin_token:
                raise ValueError("--proxy needs --admin-token (printed by `harnessrl serve`)")
            yield RemoteProxy(proxy_url, admin_token).check(), store
            return
        with local(store) as link:
            yield link, store
    finally:
        store.close()
