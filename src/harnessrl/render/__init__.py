"""Chat templates -> prompt ids, sampled ids -> replies, and exact history reuse (see conversation.py)."""

from harnessrl.render.messages import Message, ParsedCompletion, ToolCall, ToolSpec

__all__ = ["Message", "ParsedCompletion", "ToolCall", "ToolSpec", "Renderer", "Conversation", "RenderedPrompt"]


def __getattr__(name: str) -> type:  # lazy: keep `import harnessrl.render` light
    if name == "Renderer":
        from harnessrl.render.renderer import Renderer

        return Renderer
    if name in ("Conversation", "RenderedPrompt"):
        from harnessrl.render import conversation

        return getattr(conversation, name)
    raise AttributeError(name)
