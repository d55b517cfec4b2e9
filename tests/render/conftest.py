"""Fixtures for the renderer tests: the real SmolLM2 tokenizer and test-written chat templates."""

from __future__ import annotations

import pytest

# A Qwen/Hermes-style template with its own tool support, written for these tests: tool schemas
# in the system turn, one <tool_call> tag per call, runs of tool results in one user turn.
QWEN_STYLE = """
{%- if tools %}
{{- '<|im_start|>system\n' }}
{%- if messages[0].role == 'system' %}{{- messages[0].content }}{%- else %}{{- 'You are a helpful assistant.' }}{%- endif %}
{{- '\n\n# Tools\n\nFunctions you may call:\n<tools>' }}
{%- for tool in tools %}{{- '\n' + (tool | tojson) }}{%- endfor %}
{{- '\n</tools>\n\nWrite each call as <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call><|im_end|>\n' }}
{%- elif messages[0].role == 'system' %}
{{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
{%- else %}
{{- '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}
{%- endif %}
{%- for m in messages %}
{%- if m.role == 'system' and loop.first %}
{%- elif m.role == 'user' or m.role == 'system' %}
{{- '<|im_start|>' + m.role + '\n' + m.content + '<|im_end|>\n' }}
{%- elif m.role == 'assistant' %}
{{- '<|im_start|>assistant' }}
{%- if m.content %}{{- '\n' + m.content }}{%- endif %}
{%- for tc in m.tool_calls or [] %}
{%- set f = tc.function if tc.function is defined else tc %}
{{- '\n<tool_call>\n{"name": "' + f.name + '", "arguments": ' }}
{%- if f.arguments is string %}{{- f.arguments }}{%- else %}{{- f.arguments | tojson }}{%- endif %}
{{- '}\n</tool_call>' }}
{%- endfor %}
{{- '<|im_end|>\n' }}
{%- elif m.role == 'tool' %}
{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}
{{- '\n<tool_response>\n' + m.content + '\n</tool_response>' }}
{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\n' }}{%- endif %}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}
"""

# A Qwen3-style thinking template written for these tests: an assistant turn keeps its
# reasoning_content only after the last user query; earlier thinking is dropped.
THINKING_STYLE = """
{%- set ns = namespace(last=-1) %}
{%- for m in messages %}{%- if m.role == 'user' %}{%- set ns.last = loop.index0 %}{%- endif %}{%- endfor %}
{%- for m in messages %}
{%- if m.role == 'assistant' %}
{{- '<|im_start|>assistant\n' }}
{%- if loop.index0 > ns.last and m.reasoning_content %}
{{- '<think>\n' + m.reasoning_content + '\n</think>\n\n' }}
{%- endif %}
{{- m.content + '<|im_end|>\n' }}
{%- else %}
{{- '<|im_start|>' + m.role + '\n' + m.content + '<|im_end|>\n' }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}
"""


@pytest.fixture(scope="session")
def smol_tokenizer():
    """The real SmolLM2-135M-Instruct tokenizer (cached dir; built once from the packaged GGUF)."""
    from transformers import AutoTokenizer

    from harnessrl.engine.model import smollm2_tokenizer_dir

    return AutoTokenizer.from_pretrained(str(smollm2_tokenizer_dir()))


@pytest.fixture(scope="session")
def smol(smol_tokenizer):
    """Renderer with SmolLM2's own plain ChatML template (tools injected, Hermes convention)."""
    from harnessrl.render.renderer import Renderer

    return Renderer(smol_tokenizer, verify_incremental=True)


@pytest.fixture(scope="session")
def qwen(smol_tokenizer):
    """Renderer with a Qwen-style template that renders tools itself."""
    from harnessrl.render.renderer import Renderer

    return Renderer(smol_tokenizer, chat_template=QWEN_STYLE, verify_incremental=True)


@pytest.fixture(scope="session")
def thinking(smol_tokenizer):
    from harnessrl.render.renderer import Renderer

    return Renderer(smol_tokenizer, chat_template=THINKING_STYLE, verify_incremental=True)
