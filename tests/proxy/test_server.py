"""Server plumbing: durability before the response, concurrency, admin endpoints, Unix socket, health."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from harnessrl.proxy.server import ProxyServer, ProxyStartError
from harnessrl.proxy.serving import ServingPolicy
from harnessrl.render.messages import Message
from harnessrl.store import RunStore

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def test_call_is_durable_before_the_response(proxy, engine, store):
    other = RunStore(store.run_dir)  # a separate connection, as another process would open it
    for i in range(5):
        engine.replies.append(f"reply {i}")
        r = httpx.post(proxy.base_urls()["openai"] + "/chat/completions", json=CHAT)
        assert r.status_code == 200
        assert other.count_calls() == i + 1  # visible the moment the client has its answer
    other.close()


def test_concurrent_rollouts_keep_their_own_sequences(proxy, engine, store):
    keys = {f"roll-{i}": proxy.register_rollout(f"roll-{i}") for i in range(16)}

    async def conversation(client: httpx.AsyncClient, key: str) -> None:
        messages = [{"role": "user", "content": "start"}]
        for turn in range(3):
            r = await client.post(proxy.base_urls(key)["openai"] + "/chat/completions",
                                  json={"model": "m", "messages": messages, "stream": turn % 2 == 1})
            assert r.status_code == 200
            messages += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": f"turn {turn}"}]

    async def main() -> None:
        async with httpx.AsyncClient(timeout=60) as client:
            await asyncio.gather(*(conversation(client, k) for k in keys.values()))

    asyncio.run(main())
    calls = store.list_calls()
    assert len(calls) == 48
    for rid in keys:
        mine = [c for c in calls if c.rollout_id == rid]
        assert [c.seq for c in mine] == [0, 1, 2]
        assert {c.meta["rollout_key"] for c in mine} == {keys[rid]}
        for prev, nxt in zip(mine, mine[1:]):
            assert nxt.prompt_ids[: len(prev.prompt_ids) + len(prev.sampled_ids)] == prev.prompt_ids + prev.sampled_ids


def test_admin_endpoints(proxy, engine, store):
    admin = f"http://127.0.0.1:{proxy.port}/admin/rollouts"
    assert httpx.post(admin, json={"rollout_id": "x"}).status_code == 401
    assert httpx.post(admin, json={"rollout_id": "x"}, headers={"Authorization": "Bearer wrong"}).status_code == 401
    auth = {"Authorization": f"Bearer {proxy.admin_token}"}
    assert httpx.post(admin, json={}, headers=auth).status_code == 400
    r = httpx.post(admin, json={"rollout_id": "remote-1"}, headers=auth)
    assert r.status_code == 200
    key, urls = r.json()["key"], r.json()["base_urls"]
    assert urls == proxy.base_urls(key)
    listed = httpx.get(admin, headers=auth).json()["rollouts"]
    assert {"key": key, "rollout_id": "remote-1"} in listed
    engine.replies.append("hello")
    assert httpx.post(urls["openai"] + "/chat/completions", json=CHAT).status_code == 200
    assert store.list_calls()[0].rollout_id == "remote-1"
    assert httpx.delete(f"{admin}/{key}", headers=auth).status_code == 200
    assert httpx.delete(f"{admin}/{key}", headers=auth).status_code == 404
    assert httpx.post(urls["openai"] + "/chat/completions", json=CHAT).status_code == 401


def test_seq_continues_after_restart(engine, store, renderer):
    for _ in range(2):
        with ProxyServer(engine, store, renderer) as server:
            key = server.register_rollout("same")
            assert httpx.post(server.base_urls(key)["openai"] + "/chat/completions", json=CHAT).status_code == 200
    assert [c.seq for c in store.list_calls(["same"])] == [0, 1]


def test_unix_socket(engine, store, renderer, tmp_path):
    sock = tmp_path / "proxy.sock"
    with ProxyServer(engine, store, renderer, uds=sock) as server:
        engine.replies.append("via uds")
        with httpx.Client(transport=httpx.HTTPTransport(uds=str(sock))) as client:
            r = client.post("http://proxy/v1/chat/completions", json=CHAT)
        assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "via uds"
        assert httpx.get(f"http://127.0.0.1:{server.port}/health").json()["ok"] is True
    assert not sock.exists()


def test_port_in_use(proxy, engine, store, renderer):
    with pytest.raises(ProxyStartError):
        ProxyServer(engine, store, renderer, port=proxy.port).start()


def test_register_rejects_reserved_ids(proxy):
    with pytest.raises(ValueError):
        proxy.register_rollout("adhoc")
    with pytest.raises(ValueError):
        proxy.register_rollout("")


def test_rerender_history_mode(engine, store, renderer):
    engine.replies.extend(["first", "second"])
    with ProxyServer(engine, store, renderer, history_mode="rerender") as server:
        url = server.base_urls(server.register_rollout("rr"))["openai"] + "/chat/completions"
        msgs = [{"role": "user", "content": "one"}]
        httpx.post(url, json={"messages": msgs})
        httpx.post(url, json={"messages": msgs + [{"role": "assistant", "content": "first"},
                                                  {"role": "user", "content": "two"}]})
    c0, c1 = store.list_calls(["rr"])
    assert c1.meta["history_mode"] == "rerender" and set(c1.prompt_provenance) == {-1}
    plain = [Message(role=r, content=t) for r, t in (("user", "one"), ("assistant", "first"), ("user", "two"))]
    assert c1.prompt_ids == renderer.render(plain)  # what a plain deployment would send


@pytest.mark.parametrize("cap,asked,expected", [(None, 300, 300), (40, 32000, 40), (40, 10, 10), (40, None, 40)])
def test_max_tokens_cap_bounds_every_reply(engine, store, renderer, cap, asked, expected):
    """A run's per-call budget holds whatever the harness asks (Claude Code asks 32000)."""
    policy = ServingPolicy(max_tokens=2048 if cap is None else cap, max_tokens_cap=cap)
    server = ProxyServer(engine, store, renderer, policy=policy).start()
    try:
        body = dict(CHAT, **({"max_tokens": asked} if asked is not None else {}))
        engine.replies.append("ok")
        assert httpx.post(server.base_urls()["openai"] + "/chat/completions", json=body).status_code == 200
        (call,) = store.list_calls()
        assert engine.seen[-1][1].max_tokens == expected
    finally:
        server.stop()
