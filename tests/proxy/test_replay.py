"""Replay to branch (proxy/replay.py): a branch key answers its first calls with the parent's
recorded ids, then samples fresh; a harness that sends something else is detected as diverged."""

from __future__ import annotations

import httpx
import pytest

from harnessrl.proxy.replay import ReplayCall, ReplayScript, load_script


def _chat(server, key: str, messages: list[dict]) -> dict:
    r = httpx.post(f"{server.base_urls(key)['openai']}/chat/completions", timeout=30,
                   json={"model": "m", "max_tokens": 64, "messages": messages})
    assert r.status_code == 200, r.text
    return r.json()


def _turns(server, key: str, first_user: str = "count the lines of a.log") -> list[str]:
    """A two-call 'harness': asks, then resends the reply with a tool result and asks again."""
    msgs = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": first_user}]
    one = _chat(server, key, msgs)["choices"][0]["message"]["content"]
    msgs += [{"role": "assistant", "content": one}, {"role": "user", "content": "output: 42"}]
    two = _chat(server, key, msgs)["choices"][0]["message"]["content"]
    return [one, two]


def test_replay_answers_exactly_the_recorded_ids_then_samples_fresh(proxy, engine, store):
    engine.replies.extend(["wc -l a.log", "echo 42 > n.txt", "cp n.txt backup/"])
    parent_key = proxy.register_rollout("g:0")
    _turns(proxy, parent_key)
    proxy.close_rollout(parent_key)
    parent = store.list_calls(["g:0"])
    seen_before = len(engine.seen)

    branch_key = proxy.register_rollout("g:1", replay_from="g:0", branch_call=1)
    texts = _turns(proxy, branch_key)
    proxy.close_rollout(branch_key)
    branch = store.list_calls(["g:1"])

    assert texts == ["wc -l a.log", "cp n.txt backup/"]  # call 0 replayed, call 1 sampled fresh
    assert len(engine.seen) == seen_before + 1  # the engine saw only the fresh call
    assert branch[0].prompt_ids == parent[0].prompt_ids
    assert branch[0].sampled_ids == parent[0].sampled_ids and branch[0].logprobs == parent[0].logprobs
    assert branch[0].policy_version == parent[0].policy_version
    assert branch[0].meta["replay"] == {"of": parent[0].call_id, "match": "exact"}
    assert "replay" not in branch[1].meta
    assert branch[1].prompt_ids == parent[1].prompt_ids  # the harness got the same answer: same next prompt
    assert branch[1].sampled_ids != parent[1].sampled_ids


def test_a_diverged_replay_is_detected_and_sampled_fresh(proxy, engine, store):
    engine.replies.extend(["wc -l a.log", "echo 42 > n.txt", "ls"])
    key = proxy.register_rollout("g:0")
    _turns(proxy, key)
    proxy.close_rollout(key)
    key = proxy.register_rollout("g:1", replay_from="g:0", branch_call=2)
    texts = _turns(proxy, key, first_user="delete every file")  # another prompt: the harness diverged
    proxy.close_rollout(key)
    branch = store.list_calls(["g:1"])
    assert texts[0] == "ls"  # sampled, not the recorded answer
    assert branch[0].meta["replay"]["diverged"] is True
    assert branch[0].meta["replay"]["expected"] == store.list_calls(["g:0"])[0].call_id
    assert "replay" not in branch[1].meta  # the replay ended at the divergence


def test_volatile_ids_and_clocks_still_match_by_meaning(proxy, engine, store):
    engine.replies.extend(["ls -l", "done"])
    key = proxy.register_rollout("g:0")
    _turns(proxy, key, first_user="session 3f2a9c1e-1234-4abc-9def-0123456789ab, now 2026-12-02T01:34:55Z: list")
    proxy.close_rollout(key)
    key = proxy.register_rollout("g:1", replay_from="g:0", branch_call=1)
    texts = _turns(proxy, key, first_user="session 77777777-1234-4abc-9def-0123456789ab, now 2026-12-02T01:40:07Z: list")
    proxy.close_rollout(key)
    branch, parent = store.list_calls(["g:1"]), store.list_calls(["g:0"])
    assert texts[0] == "ls -l"
    assert branch[0].meta["replay"] == {"of": parent[0].call_id, "match": "meaning"}
    assert branch[0].prompt_ids != parent[0].prompt_ids  # its own rendered prompt is what is recorded
    assert branch[0].sampled_ids == parent[0].sampled_ids


def test_admin_route_registers_a_branch_and_refuses_bad_replays(proxy, engine, store):
    engine.replies.extend(["a", "b", "c"])
    key = proxy.register_rollout("g:0")
    _turns(proxy, key)
    proxy.close_rollout(key)
    admin = {"Authorization": f"Bearer {proxy.admin_token}"}
    url = f"http://127.0.0.1:{proxy.port}/admin/rollouts"
    ok = httpx.post(url, headers=admin, json={"rollout_id": "g:1", "replay": {"parent": "g:0", "branch_call": 2}})
    assert ok.status_code == 200
    assert proxy.registry.get(ok.json()["key"]).replay.pending == 2
    too_many = httpx.post(url, headers=admin, json={"rollout_id": "g:2", "replay": {"parent": "g:0", "branch_call": 3}})
    assert too_many.status_code == 400 and "2 served calls" in too_many.json()["error"]["message"]
    shape = httpx.post(url, headers=admin, json={"rollout_id": "g:3", "replay": {"parent": "g:0", "branch_call": 0}})
    assert shape.status_code == 400 and shape.json()["error"]["param"] == "replay"


def test_script_matches_unused_calls_in_any_order():
    calls = [ReplayCall("c0", (1, 2), (3,), (-0.1,), 0, "stop"), ReplayCall("c1", (1, 5), (6,), (-0.2,), 0, "stop")]
    script = ReplayScript("p", calls)
    assert script.take([1, 5], None).call.call_id == "c1"  # a side call first
    assert script.take([1, 2], None).call.call_id == "c0"
    assert script.take([1, 2], None) is None  # over: sample fresh
    with pytest.raises(ValueError, match="nothing to replay"):
        ReplayScript("p", [])


def test_load_script_skips_failed_and_undelivered_calls(store):
    from dataclasses import replace

    from harnessrl.store import CallRecord

    base = CallRecord("x", "p", 0, "openai.chat", [1], [2], [-0.5], [-1], 0, 1.0, 1.0, "stop")
    store.insert_calls([base, replace(base, call_id="e", seq=1, status="error", sampled_ids=[], logprobs=[]),
                        replace(base, call_id="u", seq=2, delivered=False),
                        replace(base, call_id="y", seq=3, prompt_ids=[1, 2, 7])])
    assert [c.call_id for c in load_script(store, "p", 2).calls] == ["x", "y"]
    with pytest.raises(ValueError, match="2 served calls"):
        load_script(store, "p", 3)


def test_rollout_keys_never_start_like_an_option():
    """A harness given its key on the command line (`--api-key KEY`) must not read it as a flag:
    one in 64 url-safe tokens starts with "-" (smolagents' argparse refused one)."""
    from harnessrl.proxy.rollouts import new_key

    keys = [new_key() for _ in range(2000)]
    assert all(k[0].isalpha() for k in keys) and len(set(keys)) == len(keys)
    assert all(len(k) == 25 for k in keys)
