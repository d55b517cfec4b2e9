"""What `harnessrl rollout` / `harnessrl eval` set up around the runner: the run store, and either
an in-process proxy (started by the caller's `local`) or a link to a proxy already running.

A running proxy records every call in its own run directory, so the runner writes its rollouts
there too (the calls and the rollouts that own them are one store): `run_dir` None means the
proxy's; another directory is refused (ProxyLinkError), since the runner would read no calls and
would re-run attempts whose calls it cannot see."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterator

from harnessrl.rollout.proxy_link import ProxyLinkError, RemoteProxy

LocalStart = Callable[[Any], ContextManager[Any]]  # store -> context yielding a started LocalProxy


def proxy_run_dir(run_dir: Path | None, info: dict[str, Any], url: str) -> Path:
    """The run directory to use with the proxy described by `info`: its own (ProxyLinkError names
    the fix when `run_dir` is another one)."""
    own = Path(str(info.get("run_dir") or ""))
    if not info.get("run_dir"):
        raise ProxyLinkError(f"the proxy at {url} does not say where it records its calls (an older "
                             "harnessrl serve?); restart it with this version")
    if run_dir is not None and run_dir.resolve() != own.resolve():
        raise ProxyLinkError(f"the proxy at {url} records its calls in {own}, not in {run_dir}: the rollouts "
                             f"must be stored with their calls. Pass --run-dir {own} or leave --run-dir out")
    return own


@contextlib.contextmanager
def proxy_session(run_dir: Path | None, *, local: LocalStart, proxy_url: str | None = None,
                  admin_token: str | None = None) -> Iterator[tuple[Any, Any]]:
    """Yields (proxy link, RunStore). Enters `local(store)` (engine + proxy in this process) unless
    `proxy_url` is given; a running proxy keeps its own engine, tool format and sampling, and its
    run directory is the session's (`proxy_run_dir`)."""
    from harnessrl.store import RunStore

    link = None
    if proxy_url:
        if not admin_token:
            raise ValueError("--proxy needs --admin-token (printed by `harnessrl serve`)")
        link = RemoteProxy(proxy_url, admin_token).check()
        run_dir = proxy_run_dir(run_dir, link.info(), proxy_url)
    if run_dir is None:
        raise ValueError("a run directory is needed (--run-dir)")
    store = RunStore(run_dir)
    try:
        if link is not None:
            yield link, store
            return
        with local(store) as started:
            yield started, store
    finally:
        store.close()
