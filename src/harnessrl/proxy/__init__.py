"""The serving proxy: OpenAI Chat Completions, Anthropic Messages and OpenAI Responses over one
policy, per-rollout secret keys, every call recorded exactly in the run store.

    request -> protocol module (anthropic / openai_chat / openai_responses) -> canonical messages
            -> calls.CallHandler: render (exact history) -> engine -> reply -> store -> response
    app.py (Starlette routes, errors) and server.py (ProxyServer: uvicorn in a thread)
"""


def __getattr__(name: str):  # lazy: keep `import harnessrl.proxy` light (no uvicorn/starlette)
    if name in ("ProxyServer", "ProxyStartError"):
        from harnessrl.proxy import server

        return getattr(server, name)
    raise AttributeError(name)
