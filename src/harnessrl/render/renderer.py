"""Renderer: messages + tools -> prompt ids with the model's own chat template; sampled ids -> reply.

    r = Renderer.from_pretrained(model_dir)
    ids = r.render(messages, tools)                  # stateless, full rendering
    parsed = r.parse(sampled_ids, tools=tools)       # text / reasoning / tool calls / finish
    conv = Conversation(r)                           # one per rollout: exact history reuse (conversation.py)
"""

from __future__ import annotations

from pathlib import Path
from collections.abc import Sequence
from typing import Any

from harnessrl.render.bash_format import ShellOverride
from harnessrl.render.errors import RenderError
from harnessrl.render.harness_text import SpecialTextEscape
from harnessrl.render.incremental import incremental_is_exact
from harnessrl.render.messages import Message, ParsedCompletion, ToolSpec
from harnessrl.render.parsing import THINK_OPEN, parse_text
from harnessrl.render.template import TemplateError, TemplateInfo, detect, to_template
from harnessrl.render.tokens import ChunkEncoder, chunking_is_exact, special_splitter

_MARK = "\u2063REPLY\u2063"
_GIL_FREE_CHARS = 65536  # texts longer than this are tokenised with the GIL released (encode_batch)


def _backend_tokenizer(tokenizer: Any) -> Any:
    """The `tokenizers.Tokenizer` behind a transformers fast tokenizer (None for slow ones)."""
    backend = getattr(tokenizer, "_tokenizer", None) if getattr(tokenizer, "is_fast", False) else None
    return backend if backend is not None and hasattr(backend, "encode") else None


def _plain_copy(backend: Any) -> Any:
    """A copy of a `tokenizers.Tokenizer` that reads special-token strings as plain text (a
    separate object: the flag is per tokenizer, and threads encode with the original meanwhile)."""
    from tokenizers import Tokenizer  # noqa: PLC0415

    plain = Tokenizer.from_str(backend.to_str())
    plain.encode_special_tokens = True
    return plain


class Renderer:
    """Chat-template rendering and reply parsing for one tokenizer (one model family)."""

    def __init__(
        self,
        tokenizer: Any,
        *,
        chat_template: str | None = None,
        tool_format: str | None = None,
        template_kwargs: dict[str, Any] | None = None,
        verify_incremental: bool = False,
        shell_overrides: Sequence[ShellOverride] = (),
    ):
        source = chat_template or getattr(tokenizer, "chat_template", None)
        if not isinstance(source, str) or not source.strip():
            raise TemplateError("the tokenizer has no chat template; pass chat_template=<jinja source>")
        self.tokenizer = tokenizer
        self.chat_template = source
        self.template_kwargs = dict(template_kwargs or {})
        self.info: TemplateInfo = detect(source, tool_format, tuple(shell_overrides))
        self.verify_incremental = verify_incremental
        # harness text never becomes control tokens (harness_text.py, docs/render.md)
        self.escape = SpecialTextEscape(getattr(tokenizer, "all_special_tokens", []) or [])
        self._backend = _backend_tokenizer(tokenizer)
        if self._backend is not None and not self._backend_agrees():
            self._backend = None
        self._plain_backend = _plain_copy(self._backend) if self._backend is not None else None
        self.eot_text = self._find_eot()
        self.eot_ids = self.encode(self.eot_text)
        self.eot_id = self.eot_ids[-1]
        eos = getattr(tokenizer, "eos_token_id", None)
        self.stop_ids: tuple[int, ...] = tuple(dict.fromkeys([self.eot_id] + ([eos] if eos is not None else [])))
        self.think_opened = self.generation_prompt().rstrip().endswith(THINK_OPEN)
        self.splitter = special_splitter(getattr(tokenizer, "all_special_tokens", []) or [])
        if not chunking_is_exact(self.encode, self.splitter, self._sample_text()):
            self.splitter = None
        self.incremental_ok = incremental_is_exact(self)

    @classmethod
    def from_pretrained(cls, model_dir: str | Path, *, tokenizer_kwargs: dict[str, Any] | None = None,
                        **kwargs: Any) -> "Renderer":
        """Load the tokenizer (and its chat template) from an HF model directory or id."""
        from transformers import AutoTokenizer  # noqa: PLC0415 (heavy import)

        try:
            tok = AutoTokenizer.from_pretrained(str(model_dir), **(tokenizer_kwargs or {}))
        except (OSError, ValueError) as exc:
            raise RenderError(f"cannot load a tokenizer from {model_dir}: {exc}. Fix: pass an HF checkpoint "
                              "directory holding tokenizer files (harnessrl.engine.model.resolve_model)") from None
        return cls(tok, **kwargs)

    @classmethod
    def from_tokenizer(cls, tokenizer: Any, **kwargs: Any) -> "Renderer":
        return cls(tokenizer, **kwargs)

    # ---- text and ids -------------------------------------------------------------------
    def render_text(self, messages: list[Message], tools: list[ToolSpec] | None = None,
                    add_generation_prompt: bool = True) -> str:
        """The template's text for messages + tools. Special-token strings inside the messages and
        tools come out as placeholders (harness_text.py) that `encode` reads as plain text."""
        conv, tool_arg = to_template(self.escape.messages(list(messages)), self.escape.tools(list(tools or [])),
                                     self.info)
        try:
            text = self.tokenizer.apply_chat_template(
                conv, tools=tool_arg, add_generation_prompt=add_generation_prompt, tokenize=False,
                chat_template=self.chat_template, **self.template_kwargs,
            )
        except Exception as exc:  # jinja raise_exception() or a template bug
            raise TemplateError(f"chat template failed to render: {exc}") from exc
        return str(text)

    def encode(self, text: str) -> list[int]:
        """Ids of text exactly as written (special tokens in it recognised; none added), except
        harness text escaped by `render_text`, which is tokenised as plain characters.

        A fast tokenizer is called through its Rust backend directly: the same ids (checked on a
        sample when the renderer is built) at about half the cost of the transformers wrapper,
        which builds a batch encoding around them. A text over `_GIL_FREE_CHARS` goes through
        `encode_batch`, which releases the GIL while it works (`encode` holds it: a 4 MB prompt
        tokenised in the proxy's worker thread froze its event loop for seconds); same ids.
        """
        if self.escape.marked(text):
            return [i for piece, control in self.escape.split(text) for i in self._encode(piece, plain=not control)]
        return self._encode(text, plain=False)

    def _encode(self, text: str, plain: bool) -> list[int]:
        """`plain`: special-token strings in `text` are characters, not control tokens."""
        backend = self._plain_backend if plain else self._backend
        if backend is not None:
            if len(text) > _GIL_FREE_CHARS:
                return backend.encode_batch([text], add_special_tokens=False)[0].ids
            return backend.encode(text, add_special_tokens=False).ids
        if plain:
            return list(self.tokenizer.encode(text, add_special_tokens=False, split_special_tokens=True))
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def _backend_agrees(self) -> bool:
        sample = self._sample_text() + "\n  tabs\t and  unicode: é ✓ 数字 123456 \r\n"
        return self._backend.encode(sample, add_special_tokens=False).ids == list(
            self.tokenizer.encode(sample, add_special_tokens=False))

    def decode(self, ids: list[int]) -> str:
        return str(self.tokenizer.decode(list(ids), skip_special_tokens=False))

    def render(self, messages: list[Message], tools: list[ToolSpec] | None = None,
               add_generation_prompt: bool = True) -> list[int]:
        """Prompt ids of a full (stateless) rendering, as a plain deployment would tokenise it."""
        return self.encode(self.render_text(messages, tools, add_generation_prompt))

    def chunk_encoder(self) -> ChunkEncoder:
        """A fresh cached encoder (one per conversation)."""
        return ChunkEncoder(self.encode, self.splitter)

    def generation_prompt(self) -> str:
        """The text the template appends to open an assistant turn."""
        msgs = [Message("user", "x")]
        with_gp = self.render_text(msgs, add_generation_prompt=True)
        without = self.render_text(msgs, add_generation_prompt=False)
        return with_gp[len(without):] if with_gp.startswith(without) else ""

    # ---- replies ------------------------------------------------------------------------
    def parse(self, sampled_ids: list[int], *, finish_reason: str | None = None,
              tools: list[ToolSpec] | None = None, id_seed: str = "", stop: Sequence[str] = ()) -> ParsedCompletion:
        """Sampled ids -> reply. The trailing stop token is not part of the text, nor is the text
        from the first of the request's ``stop`` strings on (proxy/serving.py: the stop-string rule).

        ``finish_reason`` from the engine ("stop" | "length"); when None it is inferred from
        whether the ids end with a stop id.
        """
        ids = list(sampled_ids)
        stopped = bool(ids) and ids[-1] in self.stop_ids
        if finish_reason is not None:
            stopped = finish_reason != "length"
        if ids and ids[-1] in self.stop_ids:
            ids = ids[:-1]
        return parse_text(cut_at_stop(self.decode(ids), stop), stopped=stopped, tools=tools, id_seed=id_seed,
                          think_opened=self.think_opened, shell=self.info.shell_tool(tools))

    # ---- probes -------------------------------------------------------------------------
    def _find_eot(self) -> str:
        """The end-of-turn text the template writes after an assistant message."""
        text = self.render_text([Message("user", "x"), Message("assistant", _MARK)], add_generation_prompt=False)
        after = text.split(_MARK, 1)[1] if _MARK in text else ""
        specials = [t for t in (getattr(self.tokenizer, "all_special_tokens", []) or []) if t and t in after]
        if specials:
            return min(specials, key=lambda t: (after.index(t), -len(t)))
        eos = getattr(self.tokenizer, "eos_token", None)
        if not eos:
            raise TemplateError("cannot tell the template's end-of-turn token (no special token, no eos)")
        return str(eos)

    def _sample_text(self) -> str:
        msgs = [Message("system", "Be brief."), Message("user", "Hi there!\n  two  spaces"),
                Message("assistant", "Hello - how can I help?"), Message("user", "ls -la /tmp\n")]
        return self.render_text(msgs)


def cut_at_stop(text: str, stops: Sequence[str]) -> str:
    """`text` up to (not including) the first occurrence of any stop string."""
    at = min((i for i in (text.find(s) for s in stops if s) if i >= 0), default=-1)
    return text if at < 0 else text[:at]
