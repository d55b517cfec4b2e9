"""The serving proxy: OpenAI Chat Completions, Anthropic Messages and OpenAI Responses over one
policy, per-rollout secret keys, every call recorded exactly in the run store.

    request -> wire protocol (wire.py; anthropic / openai_chat / openai_responses) -> ChatRequest
            -> calls.CallHandler: render (exact history) -> engine -> reply -> store -> response
    app.py (Starlette routes, one handler for typed errors, limits), admin.py (key registry over
    HTTP), server.py (ProxyServer: uvicorn in a thread). Limits and rules: docs/proxy.md.
"""


def __getattr__(name: str) -> type:  # lazy: keep `import harnessrl.proxy` light (no uvicorn/starlette)
    if name in ("ProxyServer", "ProxyStartError"):
        from harnessrl.proxy import server

        return getattr(server, name)
    raise AttributeError(name)
