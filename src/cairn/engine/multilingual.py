"""The ``multilingual`` embedder (the default before e5): all-MiniLM-L6-v2 and the multilingual
USE side by side.

English keeps MiniLM's meaning and every other language gets the multilingual encoder's. A
stored text gets both (one 896-float vector, both halves scaled by 1/sqrt(2): a dot product is
the mean of the two cosine similarities); an English query (``english_text``: ASCII letters,
and not Spanish, German, French, Italian, Portuguese or Dutch by its function words) is matched
the same way, any other query on the multilingual half alone, since MiniLM knows English only.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from cairn.core.languages import english_text
from cairn.engine.embedders import Embedder
from cairn.engine.niceness import lower_priority
from cairn.engine.yielding import pause_point


class MultilingualEmbedder:
    """all-MiniLM-L6-v2 and the multilingual USE side by side: the default (see the module)."""

    # Hybrid search embeds a query on a helper thread while its lexical lane runs.
    overlap = True
    # Its similarities mean the same in every language it knows: search weighs the vector
    # lane more for queries outside English script (``search.lane_weights``).
    multilingual = True

    def __init__(self, english: Embedder, multilingual: Embedder) -> None:
        self._english = english
        self._multilingual = multilingual
        self.name = f"{english.name}+{multilingual.name}"
        self.dim = english.dim + multilingual.dim
        self._lock = threading.Lock()
        self._pools: dict[str, ThreadPoolExecutor] = {}
        self._closed = False

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Both halves of every text. Several texts (the background pass's batches) where the
        CPUs cover both models' threads: the multilingual half runs on a thread of its own at
        the background's priority (``niceness``) while the English half runs in the caller's,
        so a batch takes the time of the slower model rather than of both."""
        if not texts:
            return []
        bulk = self._pool("bulk") if len(texts) > 1 and _cpus() >= self._threads() else None
        if bulk is None:
            english = self._english.embed(texts)
            pause_point()
            return _joined(english, self._multilingual.embed(texts))
        multilingual = bulk.submit(self._multilingual.embed, list(texts))
        try:
            english = self._english.embed(texts)
        finally:
            got = multilingual.result()
        return _joined(english, got)

    def embed_query(self, text: str) -> list[float]:
        """English (``english_text``): both halves (the mean of the two similarities); any
        other language: the multilingual half alone (its similarity, on the same scale). The
        two halves of an English query run at once, the multilingual one on a helper thread
        (both models release the GIL while they compute): the same vector as ``embed``, in
        the time of the slower model rather than of both."""
        if not english_text(text):
            b = self._multilingual.embed([text])[0]
            return [0.0] * self._english.dim + [x * math.sqrt(2.0) for x in b]
        helper = self._pool("query") if _cpus() > 1 else None
        if helper is None:  # closed, or one CPU: the halves one after the other
            return self.embed([text])[0]
        multilingual = helper.submit(self._multilingual.embed, [text])
        english = self._english.embed([text])
        return _joined(english, multilingual.result())[0]

    def _threads(self) -> int:
        """The threads the two halves use at once (each model's own, 1 by default)."""
        return sum(
            max(1, int(getattr(m, "threads", 1))) for m in (self._english, self._multilingual)
        )

    def _pool(self, kind: str) -> ThreadPoolExecutor | None:
        """The helper threads of queries (at the caller's priority) or of bulk calls (at the
        background's), made on first use; None once closed."""
        with self._lock:
            if self._closed:
                return None
            pool = self._pools.get(kind)
            if pool is None:
                if kind == "query":
                    pool = ThreadPoolExecutor(2, thread_name_prefix="cairn-query-half")
                else:
                    pool = ThreadPoolExecutor(
                        1, thread_name_prefix="cairn-embed-half", initializer=lower_priority
                    )
                self._pools[kind] = pool
            return pool

    def close(self) -> None:
        with self._lock:
            self._closed = True
            pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            pool.shutdown(wait=True)


def _cpus() -> int:
    """The CPUs this process may run on now (pinned by ``taskset`` or the bench)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


def _joined(english: list[list[float]], multilingual: list[list[float]]) -> list[list[float]]:
    """Each text's two unit vectors side by side, both scaled by 1/sqrt(2)."""
    half = math.sqrt(0.5)
    return [
        [x * half for x in a] + [x * half for x in b]
        for a, b in zip(english, multilingual, strict=True)
    ]
