"""Lexical ranking: the one calibration of full-text scores, for memories and chunks alike.

The store returns raw full-text scores on BM25's scale on both backends (SQLite's FTS5 BM25;
PostgreSQL's ``ts_rank`` brought to that scale by the store). A raw score ``s`` calibrates to
``s / (s + half)``: monotone, 0 for no match, 0.5 at ``half``, approaching 1 for strong
matches, so a score keeps one meaning across queries. Terms that occur in (nearly) every row
of a tiny index get a near-zero IDF: then the order is kept with a modest score instead of
reporting every match as 0.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import TypeVar

# The raw score that calibrates to 0.5: memories (turns and facts, with the neighbouring
# messages' words weighted in) and document chunks (longer passages) saturate differently.
MEMORY_HALF = 6.0
CHUNK_HALF = 4.0
# Below this, a best raw score means the index is too small to tell terms apart.
DEGENERATE = 1e-3

K = TypeVar("K", bound=Hashable)


def calibrate(raw: Iterable[tuple[K, float]], half: float) -> dict[K, float]:
    """``key → score in [0, 1]`` for ``(key, raw score)`` pairs."""
    pairs = [(key, max(s, 0.0)) for key, s in raw]
    top = max((s for _, s in pairs), default=0.0)
    if 0 < top < DEGENERATE:
        return {key: 0.5 * s / top for key, s in pairs}
    return {key: (s / (s + half) if s > 0 else 0.0) for key, s in pairs}


__all__ = ["CHUNK_HALF", "DEGENERATE", "MEMORY_HALF", "calibrate"]
