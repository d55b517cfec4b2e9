"""`ProxyServer`: the serving proxy in a background thread (uvicorn), for tests, the runner and
`harnessrl serve`.

    server = ProxyServer(engine, RunStore(run_dir), model_dir).start()
    key = server.register_rollout("rollout-0")
    urls = server.base_urls(key)   # {"openai": .../r/<key>/v1, "anthropic": .../r/<key>, "responses": ..., "gemini": .../r/<key>}
    ...
    server.close_rollout(key); server.stop()

A runner in another process attaches over HTTP: `POST /admin/rollouts {"rollout_id": ...}` with
`Authorization: Bearer <server.admin_token>` -> `{"key", "base_urls"}`; `DELETE /admin/rollouts/<key>`.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harnessrl.engine.base import Engine
from harnessrl.errors import HarnessRLError
from harnessrl.proxy.app import AppConfig, build_app
from harnessrl.proxy.calls import DEFAULT_ROLLOUT_QUOTA, CallHandler, Reply
from harnessrl.proxy.jsonutil import dumps
from harnessrl.proxy.protocols import IN_PROCESS
from harnessrl.proxy.replay import load_script
from harnessrl.proxy.rollouts import RolloutRegistry, new_key
from harnessrl.proxy.serving import ServingPolicy
from harnessrl.proxy.transport import DEFAULT_MAX_HEADER_BYTES, ConnectionGuard, guarded_protocol
from harnessrl.proxy.writer import CallWriter
from harnessrl.render.conversation import Conversation
from harnessrl.render.fingerprint import record_tokenizer
from harnessrl.store import RunStore

if TYPE_CHECKING:
    from harnessrl.render.renderer import Renderer

DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024  # per request, every route (docs/proxy.md)


class ProxyStartError(HarnessRLError, RuntimeError):
    """The proxy could not start listening (port in use, bad socket path)."""


def load_renderer(renderer_or_model_dir: Renderer | str | os.PathLike[str]) -> Renderer:
    """A Renderer from a model directory / HF id, or the given object when it already renders."""
    if not isinstance(renderer_or_model_dir, (str, os.PathLike)):
        return renderer_or_model_dir
    from harnessrl.render.renderer import Renderer  # noqa: PLC0415 (transformers)

    return Renderer.from_pretrained(str(renderer_or_model_dir))


def record_serving(store: RunStore, renderer: Renderer, policy: ServingPolicy, history: str) -> None:
    """Record in the store how its calls are served: meta "render" (the tool format the renderer
    writes, the history mode) and "serve" (the serving policy). Every started proxy writes them:
    `harnessrl serve`, `rollout` / `eval`, and a training run alike."""
    if not hasattr(store, "set_meta"):  # a bare store fake
        return
    info = getattr(renderer, "info", None)
    store.set_meta("render", {"tool_format": getattr(info, "tool_format", None), "history": history})
    store.set_meta("serve", policy.model_dump(mode="json"))


class ProxyServer:
    def __init__(self, engine: Engine, store: RunStore, renderer_or_model_dir: Renderer | str | os.PathLike[str],
                 host: str = "127.0.0.1",
                 port: int = 0, history_mode: str = "exact", *, uds: str | os.PathLike | None = None,
                 admin_token: str | None = None, served_model: str | None = None,
                 policy: ServingPolicy | None = None, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
                 stream_keepalive_s: float = 5.0, rollout_quota: int = DEFAULT_ROLLOUT_QUOTA,
                 body_timeout_s: float = 30.0, max_inflight_per_key: int = 32, drain_s: float = 30.0,
                 header_timeout_s: float = 15.0, max_connections_per_client: int = 2048,
                 keep_alive_s: float = 75.0, max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES,
                 large_body_bytes: int = 1024 * 1024, max_large_inflight_per_key: int = 2,
                 max_large_inflight: int = 4):
        self.engine = engine
        self.store = store
        self.renderer = load_renderer(renderer_or_model_dir)
        self.host = host
        self.uds = str(uds) if uds else None
        self.history_mode = history_mode
        self.admin_token = admin_token or new_key(24)
        self.served_model = served_model or Path(str(getattr(engine, "model_path", "") or "policy")).name
        self._requested_port = port
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._server: Any = None
        self.writer: CallWriter | None = None
        self._handler: CallHandler | None = None  # the call path of every route and of `call`
        self.registry = RolloutRegistry(lambda: Conversation(self.renderer, mode=history_mode), store.next_seq,
                                        on_close=store.forget_rollout, usage=store.quota_usage)
        # how calls sample (proxy/serving.py): one value, for the call handler and the white-box loop
        self.policy = policy if policy is not None else ServingPolicy()
        self._max_body_bytes = max_body_bytes
        self._keepalive_s = stream_keepalive_s  # slow streamed calls: open the stream, ping every this often
        self._rollout_quota = rollout_quota
        self._body_timeout_s = body_timeout_s
        self._max_inflight_per_key = max_inflight_per_key
        self._large = {"large_body_bytes": large_body_bytes, "max_large_inflight_per_key": max_large_inflight_per_key,
                       "max_large_inflight": max_large_inflight}  # app.py: bounded big requests
        self.drain_s = drain_s  # stop(): in-flight calls get this long to finish
        self.keep_alive_s = keep_alive_s  # an idle connection (kept alive, or fresh and silent) is closed after this
        self.guard = ConnectionGuard(header_timeout_s, max_connections_per_client, idle_timeout_s=keep_alive_s,
                                     max_header_bytes=max_header_bytes)

    # -- lifecycle -----------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._sock is None:
            raise RuntimeError("the proxy is not started")
        return self._sock.getsockname()[1]

    def start(self, timeout_s: float = 30.0) -> "ProxyServer":
        """Bind, start uvicorn in a daemon thread, return once it accepts connections."""
        import uvicorn  # noqa: PLC0415

        socks = [self._bind_tcp()]
        if self.uds:
            socks.append(self._bind_uds(self.uds))
        self.writer = CallWriter(self.store)
        record_tokenizer(self.store, getattr(self.renderer, "tokenizer", None))  # which ids these are (sft)
        record_serving(self.store, self.renderer, self.policy, self.history_mode)
        handler = self._handler = CallHandler(self.engine, self.writer, self.policy,
                              stop_ids=tuple(getattr(self.renderer, "stop_ids", ()) or ()),
                              tokenizer=getattr(self.renderer, "tokenizer", None), history_mode=self.history_mode,
                              served_model=self.served_model, rollout_quota=self._rollout_quota)
        cfg = AppConfig(self.served_model, self.admin_token, self._max_body_bytes, self.base_urls, self._keepalive_s,
                        body_timeout_s=self._body_timeout_s, max_inflight_per_key=self._max_inflight_per_key,
                        connection_stats=self.guard.stats, info=self.info, **self._large)
        app = build_app(handler, self.registry, cfg)
        # uvicorn hints these two as int; its event loop timers take fractional seconds
        config = uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False,
                                timeout_keep_alive=self.keep_alive_s,  # type: ignore[arg-type]
                                backlog=2048, http=guarded_protocol(self.guard),
                                timeout_graceful_shutdown=self.drain_s)  # type: ignore[arg-type]
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": socks},
                                        name="harnessrl-proxy", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise ProxyStartError("the proxy did not start (see the log above)")
            time.sleep(0.01)
        return self

    def _bind_tcp(self) -> socket.socket:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self._requested_port))
        except OSError as e:
            sock.close()
            raise ProxyStartError(f"cannot listen on {self.host}:{self._requested_port}: {e}") from e
        sock.set_inheritable(True)
        self._sock = sock
        return sock

    def _bind_uds(self, path: str) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            if os.path.exists(path):
                os.unlink(path)
            sock.bind(path)
            os.chmod(path, 0o666)
        except OSError as e:
            sock.close()
            raise ProxyStartError(f"cannot listen on unix socket {path}: {e}") from e
        return sock

    def stop(self) -> None:
        """Drain and stop: accept no new connection, let in-flight calls and streams finish for up
        to `drain_s` (then cancel them), commit what is queued, close the sockets. Idempotent."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=self.drain_s + 30)
            self._thread = None
        if self.writer is not None:
            self.writer.close()
            self.writer = None
        if self._sock is not None:
            self._sock.close()
        if self.uds and os.path.exists(self.uds):
            os.unlink(self.uds)

    def __enter__(self) -> "ProxyServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- rollouts ------------------------------------------------------------------------------

    def info(self) -> dict[str, Any]:
        """Where this proxy records its calls and how it serves (GET /admin/info): a runner in another
        process writes its rollouts into the same run directory and refuses options it cannot honour."""
        return {"run_dir": str(Path(self.store.run_dir).resolve()), "served_model": self.served_model,
                "tool_format": getattr(getattr(self.renderer, "info", None), "tool_format", None), "history": self.history_mode,
                "serving": self.policy.model_dump(mode="json")}

    def register_rollout(self, rollout_id: str, max_calls: int | None = None, replay_from: str | None = None,
                         branch_call: int = 0) -> str:
        """A new secret key whose routes record into `rollout_id` (`max_calls`: its model-call budget).
        With `replay_from`, the key's first `branch_call` calls are answered with that rollout's
        recorded answers, read from this proxy's store (a branch, proxy/replay.py; ValueError when
        the parent has fewer served calls)."""
        script = load_script(self.store, replay_from, branch_call) if replay_from else None
        return self.registry.register(rollout_id, max_calls=max_calls, replay=script)

    def close_rollout(self, key: str) -> None:
        """Close a key; once this returns, its calls' delivery marks are committed too."""
        self.registry.close(key)
        self.flush()

    async def call(self, key: str, request: dict[str, Any]) -> Reply:
        """One model call made in this process (the white-box agent loop): an OpenAI Chat Completions
        `request` of rollout key `key`, down the call path of the HTTP routes (CallHandler.handle: seq,
        render, sampling, length check, generate, commit, record), recorded as protocol "whitebox"
        and marked delivered once it returns (there is no connection to lose). KeyError for a key
        that is not registered; RuntimeError before `start()`."""
        if self._handler is None or self.writer is None:
            raise RuntimeError("the proxy is not started")
        rollout = self.registry.get(key)
        if rollout is None:
            raise KeyError(f"rollout key {key[:6]}... is not registered")
        reply = await self._handler.handle(IN_PROCESS, rollout, dumps(request), IN_PROCESS.name)
        if reply.call_id is not None:
            self.writer.delivered(reply.call_id)
        return reply

    def is_replaying(self, key: str) -> bool:
        """Whether `key` replays a parent's recorded calls (a branch, proxy/replay.py); KeyError for a
        key that is not registered."""
        rollout = self.registry.get(key)
        if rollout is None:
            raise KeyError(f"rollout key {key[:6]}... is not registered")
        return rollout.replay is not None

    def flush(self) -> None:
        """Commit the delivery marks queued so far (a reader of a live run sees them next)."""
        if self.writer is not None:
            self.writer.flush()

    def base_urls(self, key: str | None = None) -> dict[str, str]:
        """Base URLs for SDKs and harnesses: OpenAI/Responses end in /v1, Anthropic and Gemini
        (whose SDKs add /v1beta) do not."""
        root = f"http://{self._url_host()}:{self.port}" + (f"/r/{key}" if key else "")
        return {"openai": f"{root}/v1", "anthropic": root, "responses": f"{root}/v1", "gemini": root}

    def _url_host(self) -> str:
        return f"[{self.host}]" if ":" in self.host else self.host
