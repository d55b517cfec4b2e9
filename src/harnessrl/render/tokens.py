"""Tokenisation with a cache of turn-sized chunks, so re-rendered history is not re-tokenised.

Rendered text is cut just before each special token (``<|im_start|>`` ...). Fast tokenizers split
added special tokens out before anything else, so the ids of the pieces concatenated equal the ids
of the whole text; `chunking_is_exact` checks that for a tokenizer on a sample before it is used.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from typing import Callable, Iterable

EncodeFn = Callable[[str], list[int]]


def special_splitter(special_tokens: Iterable[str]) -> re.Pattern[str] | None:
    """A pattern matching the empty position before each special token, or None if there are none."""
    toks = sorted({t for t in special_tokens if t}, key=len, reverse=True)
    if not toks:
        return None
    return re.compile("(?=" + "|".join(re.escape(t) for t in toks) + ")")


def split_chunks(text: str, splitter: re.Pattern[str] | None) -> list[str]:
    if splitter is None:
        return [text] if text else []
    return [piece for piece in splitter.split(text) if piece]


def chunking_is_exact(encode: EncodeFn, splitter: re.Pattern[str] | None, sample: str) -> bool:
    """Do the chunk ids concatenated equal the ids of the whole sample?"""
    ids: list[int] = []
    for piece in split_chunks(sample, splitter):
        ids.extend(encode(piece))
    return ids == encode(sample)


class ChunkEncoder:
    """Encodes text chunk by chunk with a bounded LRU cache; counts the tokens really tokenised."""

    def __init__(self, encode: EncodeFn, splitter: re.Pattern[str] | None, max_entries: int = 8192):
        self._encode = encode
        self._splitter = splitter
        self._cache: OrderedDict[str, tuple[int, ...]] = OrderedDict()
        self._max = max_entries

    def encode(self, text: str) -> tuple[list[int], int]:
        """(ids of text, number of those ids produced by the tokenizer now rather than the cache)."""
        ids: list[int] = []
        fresh = 0
        for piece in split_chunks(text, self._splitter):
            hit = self._cache.get(piece)
            if hit is None:
                hit = tuple(self._encode(piece))
                fresh += len(hit)
                self._cache[piece] = hit
                if len(self._cache) > self._max:
                    self._cache.popitem(last=False)
            else:
                self._cache.move_to_end(piece)
            ids.extend(hit)
        return ids, fresh
