"""Bridge one TCP port of the host's loopback into a sandbox's private network namespace.

The sandbox has its own network namespace with only ``lo``: nothing on the host is reachable.
To let it reach exactly the rollout's proxy, the host creates a listening socket INSIDE that
namespace (a short-lived thread ``setns``-es into the namespace, binds
``127.0.0.1:<port>``, and exits; the socket stays in the sandbox's namespace) and relays each
accepted connection to the proxy on the host. No process runs inside the sandbox for this, so it
adds no start-up cost, and the sandbox cannot open any other host port: there is no route.

``listen_in_netns`` needs CAP_SYS_ADMIN over the sandbox's namespaces (root, as here). Without
it the bwrap backend has a helper inside the sandbox create the socket and pass it out over a
Unix socket pair (SCM_RIGHTS), one extra python start per sandbox; the relay is the same.

With ``target.key`` set (what rollouts use) each connection goes through ``relay.HttpRelay``,
which lets only requests under ``/r/<key>/`` reach the proxy: a sandbox cannot use the proxy's
unkeyed routes, its admin API or another rollout's key. Without a key the bytes are piped as is.
"""

from __future__ import annotations

import ctypes
import os
import select
import socket
import threading

from harnessrl.sandbox.base import ProxyEndpoint, SandboxError
from harnessrl.sandbox.relay import HttpRelay

CLONE_NEWNET = 0x40000000


def listen_in_netns(netns_fd: int, port: int) -> socket.socket:
    """A socket listening on 127.0.0.1:port inside the network namespace ``netns_fd`` refers to."""
    result: dict[str, object] = {}

    def work() -> None:  # setns changes only this thread, which then exits
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.setns(netns_fd, CLONE_NEWNET) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"setns(net) failed: {os.strerror(err)}")
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", port))
            s.listen(64)
            result["sock"] = s
        except OSError as e:
            result["error"] = e

    t = threading.Thread(target=work, name="sandbox-netns", daemon=True)
    t.start()
    t.join()
    if "error" in result:
        raise SandboxError(
            f"cannot bridge the proxy into the sandbox network namespace: {result['error']} "
            "(needs root / CAP_SYS_ADMIN; use type='local' otherwise)"
        )
    return result["sock"]  # type: ignore[return-value]


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


class ProxyBridge:
    """Accepts in the sandbox's namespace, connects to the proxy on the host, relays requests."""

    def __init__(self, listener: socket.socket, target: ProxyEndpoint, max_connections: int = 64) -> None:
        self._listener = listener
        self._target = target
        self._max_pairs = max_connections  # each costs two host threads: bounded
        self._stop_r, self._stop_w = os.pipe()
        self._lock = threading.Lock()
        self._conns: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept_loop, name="sandbox-bridge", daemon=True)
        self._thread.start()

    def _accept_loop(self) -> None:
        waitables: list[socket.socket | int] = [self._listener, self._stop_r]
        while True:
            ready, _, _ = select.select(waitables, [], [])
            if self._stop_r in ready:
                return
            try:
                inner, _ = self._listener.accept()
            except OSError:
                continue
            with self._lock:
                full = len(self._conns) >= 2 * self._max_pairs
            if full:
                inner.close()
                continue
            try:
                outer = socket.create_connection((self._target.host, self._target.port), timeout=10)
                outer.settimeout(None)
            except OSError:
                inner.close()
                continue
            with self._lock:
                self._conns += [inner, outer]
            threading.Thread(
                target=self._serve, args=(inner, outer), name="sandbox-pump", daemon=True
            ).start()

    def _serve(self, inner: socket.socket, outer: socket.socket) -> None:
        if self._target.key is not None:
            try:
                HttpRelay(inner, outer, self._target.key).serve()
            except Exception:  # noqa: BLE001 - a broken relay drops its connection, never the bridge
                pass
        else:
            back = threading.Thread(target=_pump, args=(outer, inner), name="sandbox-pump", daemon=True)
            back.start()
            _pump(inner, outer)
            back.join()
        with self._lock:
            for s in (inner, outer):
                if s in self._conns:
                    self._conns.remove(s)
                s.close()

    def close(self) -> None:
        os.write(self._stop_w, b"x")
        self._thread.join(timeout=5)
        self._listener.close()
        with self._lock:
            conns, self._conns = self._conns, []
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        os.close(self._stop_r)
        os.close(self._stop_w)
