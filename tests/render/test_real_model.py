"""The renderer with the real default checkpoint: its own template, and real sampled ids reused exactly."""

from __future__ import annotations

import pytest

from harnessrl.render.conversation import Conversation
from harnessrl.render.messages import Message, ToolSpec

pytestmark = pytest.mark.model

BASH = ToolSpec("bash", "Run a shell command.", {"type": "object", "properties": {"command": {"type": "string"}}})


@pytest.fixture(scope="module")
def real():
    import torch
    from transformers import AutoModelForCausalLM

    from harnessrl.engine.model import resolve_model
    from harnessrl.render.renderer import Renderer

    path = resolve_model(None)
    renderer = Renderer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32).eval()
    return renderer, model


def sample(model, prompt_ids, stop_ids, n=24, seed=0):
    import torch

    torch.manual_seed(seed)
    out = model.generate(torch.tensor([prompt_ids]), max_new_tokens=n, do_sample=True, temperature=1.0,
                         eos_token_id=list(stop_ids), pad_token_id=stop_ids[0])
    return out[0, len(prompt_ids):].tolist()


def test_real_checkpoint_template_and_two_sampled_turns(real):
    renderer, model = real
    assert renderer.eot_text == "<|im_end|>" and not renderer.info.native_tools
    conv = Conversation(renderer)
    history = [Message("system", "You are a shell agent."), Message("user", "Show the files here.")]
    prev = None
    for k in range(2):
        rendered = conv.prepare(history, [BASH])
        if prev is not None:  # real sampled ids (maybe not the canonical tokenisation) are kept verbatim
            p, s = prev
            assert rendered.parent_turn == k - 1
            assert rendered.ids[: len(p.ids) + len(s)] == p.ids + s
        sampled = sample(model, rendered.ids, renderer.stop_ids, seed=k)
        parsed = conv.commit(rendered, sampled, policy_version=0)
        assert parsed.finish_reason in ("stop", "length", "tool_calls")
        prev = (rendered, sampled)
        history = history + [Message("assistant", parsed.content, reasoning=parsed.reasoning,
                                     tool_calls=parsed.tool_calls)]
        history += [Message("tool", "a.txt", tool_call_id=c.id) for c in parsed.tool_calls] or [
            Message("user", "Go on.")]
