"""Renderer: template detection, own-template rendering, tool injection, incremental = full, chunking."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harnessrl.render.conversation import Conversation
from harnessrl.render.incremental import full_tail_text, stub_tail_text
from harnessrl.render.messages import Message, ToolCall, ToolSpec
from harnessrl.render.renderer import Renderer
from harnessrl.render.template import TemplateError
from harnessrl.render.tokens import ChunkEncoder

BASH = ToolSpec("bash", "Run a shell command.", {"type": "object", "properties": {"command": {"type": "string"}}})


def as_dicts(messages):
    return [{"role": m.role, "content": m.content} for m in messages]


def test_smollm2_template_is_plain_chatml(smol, smol_tokenizer):
    assert not smol.info.native_tools and smol.info.tool_format == "hermes" and not smol.info.thinks
    assert smol.eot_text == "<|im_end|>" and smol.eot_id in smol.stop_ids
    assert smol.generation_prompt() == "<|im_start|>assistant\n"
    assert smol.incremental_ok and smol.splitter is not None
    msgs = [Message("system", "Be brief."), Message("user", "Hi"), Message("assistant", "Hello"), Message("user", "?")]
    expected = smol_tokenizer.apply_chat_template(as_dicts(msgs), add_generation_prompt=True, tokenize=False)
    assert smol.render(msgs) == smol_tokenizer.encode(expected, add_special_tokens=False)


def test_plain_template_gets_hermes_tools_injected(smol):
    text = smol.render_text([Message("user", "list files")], [BASH])
    assert text.startswith("<|im_start|>system\n# Tools") and '"name": "bash"' in text
    assert "You are a helpful AI assistant named SmolLM" not in text  # the tools system turn replaces the default
    with_sys = smol.render_text([Message("system", "Be careful."), Message("user", "x")], [BASH])
    assert with_sys.startswith("<|im_start|>system\nBe careful.\n\n# Tools")
    hist = [Message("user", "x"), Message("assistant", "ok", tool_calls=[ToolCall("1", "bash", {"command": "ls"})]),
            Message("tool", "a"), Message("tool", "b")]
    text = smol.render_text(hist, [BASH])
    assert 'ok\n<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call><|im_end|>' in text
    assert "<|im_start|>user\n<tool_response>\na\n</tool_response>\n<tool_response>\nb\n</tool_response><|im_end|>" in text


def test_smollm2_list_format_override(smol_tokenizer):
    r = Renderer(smol_tokenizer, tool_format="smollm2")
    hist = [Message("user", "x"), Message("assistant", "", tool_calls=[ToolCall("1", "bash", {"command": "ls"}),
                                                                      ToolCall("2", "bash", {"command": "id"})])]
    text = r.render_text(hist, [BASH], add_generation_prompt=False)
    assert '<tool_call>[{"name": "bash", "arguments": {"command": "ls"}}, {"name": "bash"' in text
    ids = r.encode('<tool_call>[{"name": "bash", "arguments": {"command": "ls"}}]</tool_call>') + [r.eot_id]
    assert r.parse(ids).tool_calls[0].arguments == {"command": "ls"}
    with pytest.raises(TemplateError, match="unknown tool format"):
        Renderer(smol_tokenizer, tool_format="xml")


def test_qwen_style_template_matches_apply_chat_template(qwen, smol_tokenizer):
    assert qwen.info.native_tools and qwen.incremental_ok
    msgs = [Message("system", "S"), Message("user", "u"),
            Message("assistant", "", tool_calls=[ToolCall("c1", "bash", {"command": "ls"})]),
            Message("tool", "out", tool_call_id="c1")]
    dicts = [{"role": "system", "content": "S"}, {"role": "user", "content": "u"},
             {"role": "assistant", "content": "",
              "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": {"command": "ls"}}}]},
             {"role": "tool", "content": "out", "tool_call_id": "c1"}]
    tools = [{"type": "function", "function": {"name": "bash", "description": BASH.description,
                                               "parameters": BASH.parameters}}]
    expected = smol_tokenizer.apply_chat_template(dicts, tools=tools, add_generation_prompt=True, tokenize=False,
                                                  chat_template=qwen.chat_template)
    assert qwen.render_text(msgs, [BASH]) == expected


def test_template_errors_are_typed(smol_tokenizer):
    with pytest.raises(TemplateError, match="failed to render"):
        Renderer(smol_tokenizer, chat_template="{{ raise_exception('no') }}")
    with pytest.raises(TemplateError, match="no chat template"):
        Renderer(smol_tokenizer, chat_template="   ")


def test_template_that_cannot_be_cut_falls_back_to_full(smol_tokenizer):
    # a template whose output depends on the message count: the stub cut differs, so no incremental path
    counting = ("{% for m in messages %}<|im_start|>{{ m.role }} {{ messages|length }}\n{{ m.content }}<|im_end|>\n"
                "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    r = Renderer(smol_tokenizer, chat_template=counting)
    assert not r.incremental_ok
    conv = Conversation(r)
    first = conv.prepare([Message("user", "a")])
    conv.commit(first, r.encode("b") + [r.eot_id], 0)
    second = conv.prepare([Message("user", "a"), Message("assistant", "b"), Message("user", "c")])
    assert second.parent_turn == 0 and not second.incremental
    assert r.decode(second.ids).endswith("<|im_start|>user 3\nc<|im_end|>\n<|im_start|>assistant\n")


# ---- property tests: incremental tail == full rendering's tail; chunked ids == whole ids ------------
text_st = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\u2063"), max_size=30)


@st.composite
def conversations(draw):
    msgs = [Message("system", draw(text_st))] if draw(st.booleans()) else []
    msgs.append(Message("user", draw(text_st)))
    for _ in range(draw(st.integers(0, 3))):
        calls = [ToolCall(f"c{i}", "bash", {"command": draw(text_st)}) for i in range(draw(st.integers(0, 2)))]
        msgs.append(Message("assistant", draw(text_st), tool_calls=calls))
        msgs += [Message("tool", draw(text_st), tool_call_id=c.id) for c in calls] or [Message("user", draw(text_st))]
    reply = Message("assistant", draw(text_st),
                    tool_calls=[ToolCall("r", "bash", {"command": "x"})] if draw(st.booleans()) else [])
    tail_roles = draw(st.lists(st.sampled_from(["user", "tool", "system", "assistant"]), max_size=4))
    tail = [Message(role, draw(text_st), tool_call_id="r" if role == "tool" else None,
                    reasoning=draw(text_st) if role == "assistant" else None) for role in tail_roles]
    tools = [BASH] if draw(st.booleans()) else []
    return msgs, reply, tail, tools


@pytest.mark.parametrize("name", ["smol", "qwen", "thinking"])
def test_stub_tail_equals_full_tail(request, name):
    r = request.getfixturevalue(name)

    @settings(max_examples=60, deadline=None)
    @given(conversations())
    def check(case):
        history, reply, tail, tools = case
        fast = stub_tail_text(r, system_first=history[0].role == "system", reply=reply, tail=tail,
                              has_tools=bool(tools))
        assert fast == full_tail_text(r, history=history, reply=reply, tail=tail, tools=tools)

    check()


def test_chunked_encoding_equals_whole_encoding(smol):
    @settings(max_examples=60, deadline=None)
    @given(conversations())
    def check(case):
        history, reply, tail, tools = case
        text = smol.render_text(history + [reply] + tail, tools)
        enc = ChunkEncoder(smol.encode, smol.splitter)
        ids, fresh = enc.encode(text)
        assert ids == smol.encode(text) and 0 < fresh <= len(ids)
        again, fresh2 = enc.encode(text)
        assert again == ids and fresh2 == 0

    check()


def test_generation_prompt_that_opens_thinking(smol_tokenizer):
    opened = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
              "{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}")
    r = Renderer(smol_tokenizer, chat_template=opened)
    assert r.think_opened and r.info.thinks
    parsed = r.parse(r.encode("weigh options\n</think>\n\nAnswer.") + [r.eot_id])
    assert (parsed.reasoning, parsed.content) == ("weigh options", "Answer.")
    cut = r.parse(r.encode("still thinking"))
    assert cut.reasoning == "still thinking" and cut.content == "" and cut.finish_reason == "length"


def test_from_pretrained_on_a_dir_without_tokenizer_is_a_clear_error(tmp_path):
    from harnessrl.render.errors import RenderError

    with pytest.raises(RenderError, match="cannot load a tokenizer"):
        Renderer.from_pretrained(tmp_path)


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=200))
def test_backend_encode_equals_transformers_encode(smol, smol_tokenizer, text):
    """The Rust-backend fast path gives the transformers wrapper's ids, special tokens included."""
    assert smol._backend is not None
    text = text + "<|im_end|>\n" + text
    assert smol.encode(text) == list(smol_tokenizer.encode(text, add_special_tokens=False))


def test_slow_path_when_backend_disagrees(smol_tokenizer, monkeypatch):
    """A backend that tokenises differently from the wrapper is not used."""

    class Wrong:
        def encode(self, text, add_special_tokens=False):
            class E:
                ids = [0]
            return E()

    monkeypatch.setattr("harnessrl.render.renderer._backend_tokenizer", lambda tok: Wrong())
    r = Renderer(smol_tokenizer)
    assert r._backend is None
    assert r.encode("hello world") == list(smol_tokenizer.encode("hello world", add_special_tokens=False))
