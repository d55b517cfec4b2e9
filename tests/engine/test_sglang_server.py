"""SGLangServerEngine against a fake SGLang server (starlette on 127.0.0.1): token ids in and out,
logprobs, finish reasons, errors, weight update from disk + cache flush, replicas over two servers."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("starlette")
uvicorn = pytest.importorskip("uvicorn")

from starlette.applications import Starlette  # noqa: E402
from starlette.responses import JSONResponse  # noqa: E402
from starlette.routing import Route  # noqa: E402

from harnessrl.engine import EngineConfig, make_engine  # noqa: E402
from harnessrl.engine.base import EngineError, EngineOverloaded, SamplingParams  # noqa: E402
from harnessrl.engine.sglang_server import SGLangServerEngine, parse_generate  # noqa: E402

EOS = 2


def fake_app(state: dict):
    """The routes SGLangServerEngine uses, answering like SGLang's native API."""

    async def model_info(request):
        return JSONResponse({"model_path": state["model_path"], "tokenizer_path": state["model_path"],
                             "is_generation": True})

    async def server_info(request):
        return JSONResponse({"context_length": 64, "max_total_num_tokens": 10000})

    async def generate(request):
        body = await request.json()
        state["requests"].append(body)
        if state.get("overloaded"):
            return JSONResponse({"error": "busy"}, status_code=503)
        sp = body["sampling_params"]
        ids = body["input_ids"]
        # "sample": the last prompt id + 1, +2, ... (+ the weights' offset), EOS after 3 tokens
        out, reason = [], {"type": "length", "length": sp["max_new_tokens"]}
        for i in range(sp["max_new_tokens"]):
            t = EOS if i == 3 else ids[-1] + 1 + i + state["offset"]
            out.append(t)
            if t in (EOS, *sp["stop_token_ids"]):
                reason = {"type": "stop", "matched": t}
                break
        lps = [[-0.25 * (i + 1) / sp["temperature"], t, None] for i, t in enumerate(out)]
        return JSONResponse({"text": "x", "output_ids": out,
                             "meta_info": {"id": "r", "finish_reason": reason, "prompt_tokens": len(ids),
                                           "completion_tokens": len(out), "output_token_logprobs": lps}})

    async def update(request):
        body = await request.json()
        path = Path(body["model_path"])
        files = sorted(p.name for p in path.iterdir())
        state["updates"].append((str(path), files))
        if "model.safetensors" not in files:
            return JSONResponse({"success": False, "message": f"no weights in {path}"})
        from safetensors.torch import load_file

        state["offset"] = int(load_file(str(path / "model.safetensors"))["w"].item())
        return JSONResponse({"success": True, "message": "ok"})

    async def flush(request):
        state["flushes"] += 1
        return JSONResponse("Cache flushed.")

    return Starlette(routes=[
        Route("/get_model_info", model_info), Route("/get_server_info", server_info),
        Route("/generate", generate, methods=["POST"]), Route("/update_weights_from_disk", update, methods=["POST"]),
        Route("/flush_cache", flush, methods=["POST"]),
    ])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def server(tmp_path):
    servers = []

    def start(model_path: str = "") -> tuple[str, dict]:
        state = {"requests": [], "updates": [], "flushes": 0, "offset": 0, "model_path": model_path or str(tmp_path)}
        port = _free_port()
        srv = uvicorn.Server(uvicorn.Config(fake_app(state), host="127.0.0.1", port=port, log_level="error"))
        th = threading.Thread(target=srv.run, daemon=True)
        th.start()
        deadline = time.monotonic() + 30
        while not srv.started and time.monotonic() < deadline:
            time.sleep(0.05)
        servers.append((srv, th))
        return f"http://127.0.0.1:{port}", state

    yield start
    for srv, th in servers:
        srv.should_exit = True
        th.join(timeout=10)


async def test_token_ids_logprobs_and_finish(server, tmp_path):
    (tmp_path / "config.json").write_text("{}")
    url, state = server(str(tmp_path))
    eng = make_engine(EngineConfig(type="sglang_server", base_url=url))
    assert isinstance(eng, SGLangServerEngine) and eng.max_model_len == 64
    g = await eng.generate([5, 6, 7], SamplingParams(temperature=0.5, max_tokens=8, stop_token_ids=(EOS,)))
    assert g.token_ids == [8, 9, 10, EOS] and g.finish_reason == "stop"
    assert g.logprobs == pytest.approx([-0.5, -1.0, -1.5, -2.0]) and g.policy_version == 0
    req = state["requests"][-1]
    assert req["input_ids"] == [5, 6, 7] and req["return_logprob"] is True
    assert req["sampling_params"]["max_new_tokens"] == 8 and req["sampling_params"]["skip_special_tokens"] is False
    g = await eng.generate([5, 6, 7], SamplingParams(max_tokens=2))
    assert g.token_ids == [8, 9] and g.finish_reason == "length"
    # max_tokens is cut to the context window: 64 - 62 prompt tokens
    await eng.generate(list(range(10, 72)), SamplingParams(max_tokens=50))
    assert state["requests"][-1]["sampling_params"]["max_new_tokens"] == 2


async def test_weight_update_from_tensors_and_overload(server, tmp_path):
    torch = pytest.importorskip("torch")
    (tmp_path / "config.json").write_text('{"model_type": "llama"}')
    url, state = server(str(tmp_path))
    eng = SGLangServerEngine(url, weights_dir=str(tmp_path))
    eng.update_weights([("w", torch.tensor(100.0))], 4)
    assert eng.policy_version == 4 and state["flushes"] == 1
    path, files = state["updates"][-1]
    assert files == ["config.json", "model.safetensors"] and not Path(path).exists()  # written, loaded, removed
    g = await eng.generate([1], SamplingParams(max_tokens=2))
    assert g.token_ids == [102, 103] and g.policy_version == 4
    (tmp_path / "empty").mkdir()
    with pytest.raises(EngineError, match="refused"):
        eng.update_weights_from_disk(str(tmp_path / "empty"), 5)
    assert eng.policy_version == 4
    state["overloaded"] = True
    with pytest.raises(EngineOverloaded):
        await eng.generate([1], SamplingParams(max_tokens=2))


async def test_two_sglang_replicas_route_and_sync(server, tmp_path):
    torch = pytest.importorskip("torch")
    (tmp_path / "config.json").write_text("{}")
    (url_a, a), (url_b, b) = server(str(tmp_path)), server(str(tmp_path))
    eng = make_engine(EngineConfig(type="sglang_server", base_urls=[url_a, url_b], replicas=2))
    for i in range(8):
        await eng.generate([3], SamplingParams(max_tokens=1, route_key=f"rollout-{i}"))
    assert len(a["requests"]) > 0 and len(b["requests"]) > 0 and len(a["requests"]) + len(b["requests"]) == 8
    eng.update_weights([("w", torch.tensor(7.0))], 2)
    assert eng.policy_version == 2 and a["offset"] == b["offset"] == 7


def test_malformed_responses_are_engine_errors():
    with pytest.raises(EngineError, match="unexpected"):
        parse_generate({"text": "hi"}, 0, 0.0)
    with pytest.raises(EngineError, match="abort"):
        parse_generate({"meta_info": {"finish_reason": {"type": "abort"}, "output_token_logprobs": []}}, 0, 0.0)
    with pytest.raises(EngineError, match="disagree"):
        parse_generate({"output_ids": [1, 2], "meta_info": {"finish_reason": {"type": "stop"},
                                                            "output_token_logprobs": [[-1.0, 3, None]]}}, 0, 0.0)
