"""Assertions on the store shared by the proxy tests."""

from __future__ import annotations

from harnessrl.store import PROMPT, CallRecord


def assert_call_ok(call: CallRecord) -> None:
    assert call.status == "ok"
    assert call.sampled_ids and len(call.logprobs) == len(call.sampled_ids)
    assert len(call.prompt_provenance) == len(call.prompt_ids)


def assert_prefix_chain(calls: list[CallRecord]) -> None:
    """Call k+1's prompt starts with call k's prompt + sampled ids; reused sampled ids keep their version."""
    for prev, nxt in zip(calls, calls[1:]):
        head = prev.prompt_ids + prev.sampled_ids
        assert nxt.prompt_ids[: len(head)] == head, f"seq {nxt.seq} does not extend seq {prev.seq}"
        start = len(prev.prompt_ids)
        assert nxt.prompt_provenance[start : len(head)] == [prev.policy_version] * len(prev.sampled_ids)
        assert nxt.prompt_provenance[: start] == prev.prompt_provenance
        assert nxt.prompt_provenance[len(head):] == [PROMPT] * (len(nxt.prompt_ids) - len(head))


def tool_call_text(*calls: tuple[str, dict]) -> str:
    """Model output in the Hermes convention: one <tool_call> tag per call."""
    import json

    return "".join(f'<tool_call>\n{json.dumps({"name": n, "arguments": a})}\n</tool_call>\n' for n, a in calls)


def check_two_sdk_turns(engine, store, rollout_id: str) -> None:
    """A real engine behind the proxy: an OpenAI Chat turn, then an Anthropic streamed turn that
    resends it; both calls stored with engine logprobs, the reply's ids reused in the next prompt."""
    import math

    import anthropic
    import openai

    from harnessrl.engine.model import resolve_model
    from harnessrl.proxy.server import ProxyServer

    with ProxyServer(engine, store, resolve_model(None)) as server:
        key = server.register_rollout(rollout_id)
        oa = openai.OpenAI(base_url=server.base_urls(key)["openai"], api_key="x", max_retries=0)
        first = oa.chat.completions.create(model="smollm2", max_tokens=12, temperature=0.7,
                                           messages=[{"role": "user", "content": "Say hello in one word."}])
        text = first.choices[0].message.content or ""
        assert first.usage.completion_tokens >= 1
        an = anthropic.Anthropic(base_url=server.base_urls(key)["anthropic"], api_key="x", max_retries=0)
        with an.messages.stream(model="claude", max_tokens=12, messages=[
                {"role": "user", "content": "Say hello in one word."},
                {"role": "assistant", "content": text},
                {"role": "user", "content": "Now say goodbye."}]) as s:
            second = s.get_final_message()
        assert second.usage.output_tokens >= 1
    calls = store.list_calls([rollout_id], include_raw=True)
    assert [c.status for c in calls] == ["ok", "ok"]
    for c in calls:
        assert len(c.logprobs) == len(c.sampled_ids) >= 1
        assert all(lp <= 0.0 and math.isfinite(lp) for lp in c.logprobs)
        assert c.policy_version == engine.policy_version
    assert calls[0].temperature == 0.7 and calls[1].temperature == 1.0
    assert_prefix_chain(calls)  # the reply's sampled ids are reused verbatim in the next prompt
    assert calls[1].prompt_provenance.count(PROMPT) < len(calls[1].prompt_ids)


def check_stop_string(engine, store, renderer) -> None:
    """Greedy decoding on one prompt: without a stop, then with a multi-token stop string taken
    from the middle of that reply. The second call's ids are the first's, cut at the token that
    completed the stop; its text ends before the stop (the rule of proxy/serving.py)."""
    import httpx

    from harnessrl.proxy.server import ProxyServer

    server = ProxyServer(engine, store, renderer).start()
    try:
        url = f"{server.base_urls(server.register_rollout('stop'))['openai']}/chat/completions"
        body = {"model": "m", "temperature": 0, "max_tokens": 48,
                "messages": [{"role": "user", "content": "List three colours, one per line."}]}
        # once to fill the engine's prefix cache: vLLM's greedy reply to a prompt served from its cache
        # can differ from the one it computed afresh (bf16 on CPU), so both compared calls are cached ones
        httpx.post(url, json=body, timeout=300).raise_for_status()
        first = httpx.post(url, json=body, timeout=300).json()["choices"][0]["message"]["content"]
        free = store.list_calls(["stop"])[1].sampled_ids
        words = [w for w in first.split() if len(renderer.encode(w)) > 1]
        assert words, first
        stop = words[len(words) // 2]
        cut = httpx.post(url, json={**body, "stop": [stop]}, timeout=300).json()["choices"][0]
    finally:
        server.stop()
    call = store.list_calls(["stop"])[2]
    k = len(call.sampled_ids)
    assert call.sampled_ids == free[:k] and len(call.logprobs) == k and call.finish_reason == "stop"
    assert stop in renderer.decode(call.sampled_ids) and stop not in renderer.decode(call.sampled_ids[:-1])
    assert cut["finish_reason"] == "stop" and cut["message"]["content"] == first[:first.index(stop)].rstrip()
