"""The runner's view of the proxy: register a rollout key, close it, know the port.

Either an in-process `ProxyServer` (what `harnessrl rollout` and the trainer start) or a proxy
in another process reached over its admin API (`--proxy URL --admin-token T`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

from harnessrl.errors import HarnessRLError
from harnessrl.rollout.plan import Branch


class ProxyLinkError(HarnessRLError, RuntimeError):
    """The proxy refused or could not be reached (the message says which and how to fix it)."""


class ProxyLink(Protocol):
    """How the runner reaches a proxy: its port, the model name it serves, per-rollout keys."""

    @property
    def port(self) -> int: ...

    @property
    def served_model(self) -> str: ...

    def register(self, rollout_id: str, max_calls: int | None = None, replay: Branch | None = None) -> str: ...

    def close(self, key: str) -> None: ...

    def in_process(self) -> Any: ...


@dataclass
class LocalProxy:
    """An in-process harnessrl.proxy.ProxyServer (already started)."""

    server: Any

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def served_model(self) -> str:
        return str(getattr(self.server, "served_model", "policy"))

    def register(self, rollout_id: str, max_calls: int | None = None, replay: Branch | None = None) -> str:
        if replay is None:
            return self.server.register_rollout(rollout_id, max_calls=max_calls)
        return self.server.register_rollout(rollout_id, max_calls=max_calls, replay_from=replay.parent,
                                            branch_call=replay.branch_call)

    def close(self, key: str) -> None:
        self.server.close_rollout(key)

    def in_process(self) -> Any:
        """The ProxyServer itself (an in-process agent loop calls it: harness/whitebox.py)."""
        return self.server


@dataclass
class RemoteProxy:
    """A proxy in another process on this machine, driven through /admin/rollouts."""

    url: str
    admin_token: str
    served_model: str = "policy"

    @property
    def port(self) -> int:
        parts = urlsplit(self.url)
        if parts.hostname not in ("127.0.0.1", "localhost") or parts.port is None:
            raise ProxyLinkError(f"--proxy must be http://127.0.0.1:<port> (sandboxes reach loopback only), got {self.url}")
        return parts.port

    def check(self) -> "RemoteProxy":
        """Fail fast (ProxyLinkError) when nothing answers /health at the URL."""
        import httpx

        try:
            httpx.get(f"{self.url.rstrip('/')}/health", timeout=10).raise_for_status()
        except httpx.HTTPError as e:
            raise ProxyLinkError(f"no harnessrl proxy answers at {self.url} ({e}); start one with `harnessrl serve`") from e
        _ = self.port  # validates the address (loopback, explicit port)
        return self

    def info(self) -> dict[str, Any]:
        """The proxy's GET /admin/info: its run directory (where its calls are recorded) and how it
        serves; ProxyLinkError when it cannot tell (a wrong admin token, an older proxy)."""
        import httpx

        try:
            r = httpx.get(f"{self.url.rstrip('/')}/admin/info", headers=self._headers(), timeout=30)
        except httpx.HTTPError as e:
            raise ProxyLinkError(f"cannot reach the proxy at {self.url}: {e}") from e
        if r.status_code != 200:
            raise ProxyLinkError(f"the proxy at {self.url} did not describe itself ({r.status_code}): {r.text[:300]} "
                                 "(check --admin-token)")
        info = r.json()
        self.served_model = str(info.get("served_model") or self.served_model)
        return info

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.admin_token}"}

    def register(self, rollout_id: str, max_calls: int | None = None, replay: Branch | None = None) -> str:
        import httpx

        body: dict[str, Any] = {"rollout_id": rollout_id}
        if max_calls is not None:
            body["max_calls"] = max_calls
        if replay is not None:
            body["replay"] = {"parent": replay.parent, "branch_call": replay.branch_call}
        try:
            r = httpx.post(f"{self.url.rstrip('/')}/admin/rollouts", json=body,
                           headers=self._headers(), timeout=30)
        except httpx.HTTPError as e:
            raise ProxyLinkError(f"cannot reach the proxy at {self.url}: {e}") from e
        if r.status_code != 200:
            raise ProxyLinkError(f"the proxy refused to register a rollout ({r.status_code}): {r.text[:300]} "
                                 "(check --admin-token)")
        return r.json()["key"]

    def close(self, key: str) -> None:
        import httpx

        try:
            httpx.delete(f"{self.url.rstrip('/')}/admin/rollouts/{key}", headers=self._headers(), timeout=30)
        except httpx.HTTPError:
            pass  # the key dies with the proxy anyway

    def in_process(self) -> None:
        """None: this proxy runs in another process (an in-process agent loop cannot call it)."""
        return None


def as_proxy_link(proxy: Any) -> ProxyLink:
    """A ProxyServer or anything with register/close/port."""
    if hasattr(proxy, "register_rollout"):
        return LocalProxy(proxy)
    if hasattr(proxy, "register") and hasattr(proxy, "close"):
        return proxy
    raise TypeError(f"expected a ProxyServer or a ProxyLink, got {type(proxy).__name__}")
