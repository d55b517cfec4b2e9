"""Which tokenizer made a run's ids: a fingerprint recorded in the run store, read back by SFT.

Token ids mean something only under the tokenizer that produced them, so a run records the
fingerprint of every tokenizer its proxy rendered with (store meta "tokenizers": a list, one entry
per distinct tokenizer, with the model directory it came from). `harnessrl sft` refuses a run that
holds two, and a student whose tokenizer is not the run's.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

META_KEY = "tokenizers"


def tokenizer_fingerprint(tokenizer: Any) -> str:
    """A short hash of the vocabulary and the special/added tokens (what maps ids to text)."""
    vocab = sorted(tokenizer.get_vocab().items(), key=lambda kv: kv[1])
    added = sorted(str(t) for t in (getattr(tokenizer, "all_special_tokens", None) or []))
    h = hashlib.sha256(json.dumps([vocab, added], ensure_ascii=False).encode())
    return h.hexdigest()[:16]


def tokenizer_name(tokenizer: Any) -> str:
    return str(getattr(tokenizer, "name_or_path", "") or "")


def record_tokenizer(store: Any, tokenizer: Any) -> None:
    """Add this tokenizer to the run's recorded list (once)."""
    if not hasattr(tokenizer, "get_vocab") or not (hasattr(store, "set_meta") and hasattr(store, "get_meta")):
        return  # test doubles
    entry = {"fingerprint": tokenizer_fingerprint(tokenizer), "name": tokenizer_name(tokenizer)}
    seen = list(store.get_meta(META_KEY) or [])
    if all(e.get("fingerprint") != entry["fingerprint"] for e in seen):
        store.set_meta(META_KEY, seen + [entry])


def recorded_tokenizers(store: Any) -> list[dict[str, str]]:
    """The tokenizers a run's proxy recorded ([] for runs written before they were recorded)."""
    return [dict(e) for e in (store.get_meta(META_KEY) or [])]
