"""Network isolation with REAL bubblewrap: a sandbox reaches its proxy (its own rollout key only)
and nothing else, and the relay bounds what one sandbox can hold open."""

from __future__ import annotations

import http.server
import shutil
import socket
import threading
from pathlib import Path

import pytest

from harnessrl.sandbox import ProxyEndpoint, SandboxConfig, make_sandbox

pytestmark = [
    pytest.mark.bwrap,
    pytest.mark.skipif(
        shutil.which("bwrap") is None, reason="bubblewrap missing: apt-get install bubblewrap"
    ),
]


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = f"proxy-says-hi {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


@pytest.fixture
def fake_proxy():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    yield ProxyEndpoint(port=server.server_address[1])
    server.shutdown()
    server.server_close()


@pytest.fixture
def other_listener():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    s.setblocking(False)
    yield s
    s.close()


FETCH = "import sys, urllib.request\nprint(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())\n"
CONNECT = (
    "import socket, sys\n"
    "try:\n"
    "    socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=3)\n"
    "    print('CONNECTED')\n"
    "except OSError as e:\n"
    "    print('refused', e)\n"
)


def test_proxy_is_reachable(fake_proxy):
    with make_sandbox(SandboxConfig(), proxy=fake_proxy) as box:
        assert box.proxy_base == f"http://127.0.0.1:{fake_proxy.port}"
        for i in range(3):  # several connections through the bridge
            res = box.run(["python", "-c", FETCH, f"{box.proxy_base}/r/key{i}/v1/models"])
            assert res.ok, res
            assert res.stdout.strip() == f"proxy-says-hi /r/key{i}/v1/models"


def test_other_loopback_ports_are_unreachable(fake_proxy, other_listener):
    port = other_listener.getsockname()[1]
    with make_sandbox(SandboxConfig(), proxy=fake_proxy) as box:
        res = box.run(["python", "-c", CONNECT, str(port)])
        assert "CONNECTED" not in res.stdout and "refused" in res.stdout
    with pytest.raises(BlockingIOError):
        other_listener.accept()  # nothing ever arrived on the host side
    with make_sandbox(SandboxConfig()) as box:  # no proxy given: not even the proxy port
        res = box.run(["python", "-c", CONNECT, str(fake_proxy.port)])
        assert "CONNECTED" not in res.stdout


def test_many_sandboxes_from_many_threads(fake_proxy):
    results: list[str] = []

    def one(i: int) -> None:
        with make_sandbox(SandboxConfig(), proxy=fake_proxy) as box:
            box.run(["sh", "-c", f"echo {i} > n.txt"])
            r = box.run(["python", "-c", FETCH, f"{box.proxy_base}/t{i}"])
            results.append(box.run(["cat", "n.txt"]).stdout.strip() + "|" + r.stdout.strip())

    threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [f"{i}|proxy-says-hi /t{i}" for i in range(4)]


def test_proxy_bridge_without_setns(fake_proxy, monkeypatch):
    """The non-root path: a helper inside makes the listening socket and hands it out."""
    from harnessrl.sandbox import bwrap
    from harnessrl.sandbox.base import SandboxError

    def refuse(fd, port):
        raise SandboxError("setns refused (simulated non-root)")

    monkeypatch.setattr(bwrap, "listen_in_netns", refuse)
    with make_sandbox(SandboxConfig(), proxy=fake_proxy) as box:
        res = box.run(["python", "-c", FETCH, f"{box.proxy_base}/via-helper"])
        assert res.ok and res.stdout.strip() == "proxy-says-hi /via-helper", res


@pytest.fixture
def silent_proxy():
    """A 'proxy' that accepts connections and never answers or closes them."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(128)
    held: list[socket.socket] = []
    stop = threading.Event()

    def serve():
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                continue

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield ProxyEndpoint(port=srv.getsockname()[1])
    stop.set()
    t.join()
    for c in held:
        c.close()
    srv.close()


def test_proxy_connections_per_sandbox_are_capped(silent_proxy):
    # 80 connections; the relay keeps 64 (the proxy never closes them) and closes the rest at
    # once: exactly 16 see EOF, whatever the timing.
    script = (
        "import select, socket, sys, time\n"
        "socks = [socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=10) for _ in range(80)]\n"
        "closed, deadline = set(), time.monotonic() + 60\n"
        "while len(closed) < 16 and time.monotonic() < deadline:\n"
        "    for s in select.select([s for s in socks if s not in closed], [], [], 1)[0]:\n"
        "        if s.recv(64) == b'':\n"
        "            closed.add(s)\n"
        "time.sleep(1)\n"
        "late = [s for s in select.select([s for s in socks if s not in closed], [], [], 0)[0]]\n"
        "print(len(closed), len(late))\n"
    )
    with make_sandbox(SandboxConfig(), proxy=silent_proxy) as box:
        res = box.run(["python", "-c", script, str(silent_proxy.port)], timeout_s=120)
        assert res.ok, res
        assert res.stdout.split() == ["16", "0"]


KEYED_CLIENT = r"""
import http.client, json, sys
import anthropic, openai
port, own, other = int(sys.argv[1]), sys.argv[2], sys.argv[3]
base = f"http://127.0.0.1:{port}"
out = {}
def status_of(make):
    try:
        make()
        return 200
    except openai.APIStatusError as e:
        return [e.status_code, e.body]
    except anthropic.APIStatusError as e:
        return [e.status_code, e.body]
msgs = [{"role": "user", "content": "hi"}]
oa = lambda path: openai.OpenAI(base_url=base + path, api_key="x", max_retries=0)
an = lambda path: anthropic.Anthropic(base_url=base + path, api_key="x", max_retries=0)
out["unkeyed"] = status_of(lambda: oa("/v1").chat.completions.create(model="m", messages=msgs, max_tokens=8))
out["other"] = status_of(lambda: oa(f"/r/{other}/v1").chat.completions.create(model="m", messages=msgs, max_tokens=8))
out["other_anthropic"] = status_of(lambda: an(f"/r/{other}").messages.create(model="m", messages=msgs, max_tokens=8))
out["own"] = oa(f"/r/{own}/v1").chat.completions.create(model="m", messages=msgs, max_tokens=8).choices[0].message.content
with an(f"/r/{own}").messages.stream(model="m", messages=msgs, max_tokens=8) as s:
    out["own_stream"] = [e.type for e in s][-1], s.get_final_message().content[0].text
stream = oa(f"/r/{own}/v1").chat.completions.create(model="m", messages=msgs, max_tokens=8, stream=True)
out["own_chat_stream"] = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
for path in ("/admin/rollouts", "/health", f"/r/{own}/v1/models"):
    conn.request("GET", path)
    r = conn.getresponse()
    out[path] = [r.status, r.read().decode()[:200]]
print(json.dumps(out))
"""


def test_a_sandbox_reaches_only_its_own_rollout_key(tmp_path: Path):
    """Issue 12: from inside bwrap, the unkeyed (adhoc) routes and another rollout's key are
    refused with a typed 403 in the caller's protocol; the own key works, streams included."""
    import json

    from harnessrl.engine.model import smollm2_tokenizer_dir
    from harnessrl.proxy.server import ProxyServer
    from harnessrl.render.renderer import Renderer
    from harnessrl.store import RunStore
    from tests.proxy.fakes import TextScriptEngine

    renderer = Renderer.from_pretrained(smollm2_tokenizer_dir())
    with RunStore(tmp_path / "run") as store:
        server = ProxyServer(TextScriptEngine(renderer.encode, renderer.eot_id), store, renderer).start()
        try:
            own, other = server.register_rollout("own"), server.register_rollout("other")
            with make_sandbox(SandboxConfig(), proxy=ProxyEndpoint(port=server.port, key=own)) as box:
                res = box.run(["python", "-c", KEYED_CLIENT, str(server.port), own, other], timeout_s=120)
            assert res.ok, res.stderr[-3000:]
            out = json.loads(res.stdout)
        finally:
            server.stop()
        assert out["unkeyed"][0] == 403 and out["unkeyed"][1]["code"] == "forbidden"
        assert out["other"][0] == 403 and out["other"][1]["code"] == "forbidden"
        assert out["other_anthropic"][0] == 403
        assert out["other_anthropic"][1]["error"]["type"] == "permission_error"
        assert out["own"] == "ok"
        assert out["own_stream"] == ["message_stop", "ok"]
        assert out["own_chat_stream"] == "ok"
        assert out["/admin/rollouts"][0] == 403 and out["/health"][0] == 403
        assert out[f"/r/{own}/v1/models"][0] == 200
        assert store.count_calls("own") == 3
        assert store.count_calls("other") == 0 and store.count_calls("adhoc") == 0
