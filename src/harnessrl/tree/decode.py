"""Token decoders for tree previews: the run's tokenizer where it loads, else the token ids."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Sequence

from rich.console import Console

from harnessrl.tree.view_text import ids_decode

if TYPE_CHECKING:
    from harnessrl.store.run_store import RunStore

Decoder = Callable[[Sequence[int]], str]


def load_decoder(spec: str, console: Console, run_model: str | None = None) -> Decoder:
    """A token decoder for previews: a HF tokenizer (lazy transformers import) or the ids.

    ``auto``: the run's model (``model.path`` of the run config stored in the run), else the
    default model's tokenizer; ``none``: the ids; anything else: an HF model directory."""
    if spec == "none":
        return ids_decode
    try:
        from transformers import AutoTokenizer

        if spec == "auto" and run_model:
            from harnessrl.engine.model import resolve_model

            spec = str(resolve_model(run_model))
        elif spec == "auto":
            from harnessrl.engine.model import smollm2_tokenizer_dir

            spec = str(smollm2_tokenizer_dir())
        tok = AutoTokenizer.from_pretrained(spec)
    except Exception as err:  # noqa: BLE001 - any failure: previews fall back to ids, never a traceback
        console.print(f"[yellow]no tokenizer ({type(err).__name__}: {err}); showing token ids. "
                      f"Pass --tokenizer DIR (an HF model dir) or --tokenizer none.[/yellow]")
        return ids_decode
    return lambda ids: tok.decode(list(ids), skip_special_tokens=False)


def run_model(store: RunStore) -> str | None:
    """The model path of the run config a training run stored (None: default model / not recorded)."""
    cfg = store.get_meta("config")
    model = cfg.get("model") if isinstance(cfg, dict) else None
    return model.get("path") if isinstance(model, dict) else None
