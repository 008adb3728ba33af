"""The vector lane's partition matrices: every vector of a partition in memory as one matrix,
for nearest neighbours over all of them, cached while the partition's vectors stay the same (one
primary-key read of its vector version per search) and extended in place of a re-read when the
background pass has only added vectors after the last row. A partition of ``MIN_ROWS`` memories
or more is held as int8 codes and scored through them, to within about 0.003 of the cosine
(``cairn.engine.int8_dots``); a smaller one as float32, exactly."""

from __future__ import annotations

import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from cairn.core.scope import Scope
from cairn.engine.int8_dots import MIN_ROWS, Codes, Int8Dots
from cairn.store import Store

if TYPE_CHECKING:
    from cairn.store import UnitOfWork


@dataclass
class _Matrix:
    stamp: tuple[int, int]
    seqs: np.ndarray
    # A row per seq, float32 (empty when ``codes`` holds them).
    vectors: np.ndarray
    # The partition's rows still waiting for a vector when the matrix was read, counted up to
    # one more than ``seqs`` holds (``covers`` needs no more).
    unembedded: int = 0
    # The rows as ``int8_dots.Codes`` (a big partition), else None.
    codes: Codes | None = None
    # The distinct speakers of the rows read (a superset of those of ``seqs``: "" for rows
    # without one); None: not known. A memory's speaker is set when it is compiled and kept.
    speakers: frozenset[str] | None = None

    def covers(self, share: float) -> bool:
        """Whether at least ``share`` (in [0.5, 1]: ``unembedded`` is counted only that far)
        of the partition's rows had a vector when the matrix was read."""
        if not 0.5 <= share <= 1.0:
            raise ValueError(f"share must be in [0.5, 1], got {share}")
        written = len(self.seqs)
        return written > 0 and self.unembedded * share <= written * (1.0 - share)

    @property
    def dim(self) -> int:
        """The vectors' length (0 for a matrix without rows)."""
        if self.codes is not None:
            return self.codes.dim
        return int(self.vectors.shape[1]) if self.vectors.ndim == 2 else 0

    @property
    def nbytes(self) -> int:
        codes = self.codes.nbytes if self.codes is not None else 0
        return int(self.seqs.nbytes + self.vectors.nbytes + codes)

    def nearest(self, query: np.ndarray, n: int, dots: Int8Dots) -> dict[int, float]:
        """``seq → product with query`` (the cosine) for the ``n`` rows of largest product:
        through ``dots`` for a coded matrix, else exactly in float32."""
        if self.codes is not None:
            rows, sims = dots.nearest(self.codes, query, n)
        else:
            # einsum runs in this thread; BLAS matmul wakes a thread pool, which on a busy
            # server costs several times the arithmetic (0.8 ms vs 7 ms for 10,000 x 384).
            sims = np.einsum("ij,j->i", self.vectors, query)
            n = min(n, len(sims))
            rows = np.argpartition(-sims, n - 1)[:n] if n < len(sims) else np.arange(len(sims))
            sims = sims[rows]
        return {int(self.seqs[i]): float(s) for i, s in zip(rows, sims, strict=True)}


class VectorIndex:
    """Nearest neighbours over every vector of a partition, cached in memory while the
    vectors are the same (checked by one read of the partition's vector version on every
    search).

    At most ``max_partitions`` matrices and ``max_bytes`` of them are kept, the least recently
    searched dropped first (the one just searched is kept whatever its size): a partition of
    10,000 memories is 4 MB with the default e5 embedder (9 MB with ``multilingual``; 100,000: 40
    and 90 MB), so a count alone would
    let a server with many large subjects grow without bound."""

    def __init__(self, max_partitions: int = 64, max_bytes: int | None = None) -> None:
        self._lock = threading.Lock()
        self._cache: OrderedDict[tuple[Any, ...], _Matrix] = OrderedDict()
        self._max = max_partitions
        self._max_bytes = max_bytes
        self._bytes = 0
        # When each tenant's matrices were last dropped (``time.monotonic``; "" for all): a
        # matrix read in a transaction opened before then (a snapshot that may predate the
        # erasure) is answered but not kept.
        self._dropped_at: dict[str, float] = {}
        # The integer product of big partitions (its onnxruntime session built on first use).
        self.dots = Int8Dots()

    @property
    def nbytes(self) -> int:
        """The bytes of the matrices kept."""
        return self._bytes

    @staticmethod
    def _key(store: Store, tenant_id: str, scope: Scope) -> tuple[Any, ...]:
        return (store.location, tenant_id, scope.runtime_id, scope.user_id, scope.agent_id)

    def drop(self, store: Store, tenant_id: str, scope: Scope) -> None:
        """Forget the partition's matrix (its data was erased)."""
        with self._lock:
            gone = self._cache.pop(self._key(store, tenant_id, scope), None)
            self._bytes -= gone.nbytes if gone is not None else 0
            self._dropped_at[tenant_id] = time.monotonic()

    def drop_tenant(self, tenant_id: str) -> None:
        """Forget every matrix of the tenant (data of it was erased, by another process)."""
        with self._lock:
            for key in [k for k in self._cache if k[1] == tenant_id]:
                self._bytes -= self._cache.pop(key).nbytes
            self._dropped_at[tenant_id] = time.monotonic()

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()
            self._bytes = 0
            self._dropped_at = {"": time.monotonic()}

    def matrix(self, store: Store, tx: UnitOfWork, tenant_id: str, scope: Scope) -> _Matrix:
        """The partition's vectors, read in ``tx`` (a unit of work of ``store``)."""
        key = self._key(store, tenant_id, scope)
        stamp = tx.memories.vector_stamp(tenant_id, scope)
        with self._lock:
            got = self._cache.get(key)
            if got is not None and got.stamp == stamp:
                self._cache.move_to_end(key)
                return got
        built = _appended(got, stamp, tx, tenant_id, scope) if got is not None else None
        if built is None:
            built = _read_matrix(stamp, tx, tenant_id, scope)
        # Counted once per vector version: while the background pass writes a partition's
        # vectors every batch changes it; rows compiled since leave it alone until their
        # vectors start to arrive.
        waiting = tx.memories.unembedded_count(tenant_id, scope, len(built.seqs) + 1)
        built = replace(built, unembedded=waiting)
        with self._lock:
            dropped = max(self._dropped_at.get(tenant_id, 0.0), self._dropped_at.get("", 0.0))
            if tx.opened_at <= dropped:
                return built  # ``tx`` may predate an erasure: answered, not kept
            replaced = self._cache.pop(key, None)
            self._bytes += built.nbytes - (replaced.nbytes if replaced is not None else 0)
            self._cache[key] = built
            while len(self._cache) > 1 and (
                len(self._cache) > self._max
                or (self._max_bytes is not None and self._bytes > self._max_bytes)
            ):
                self._bytes -= self._cache.popitem(last=False)[1].nbytes
        return built


def _appended(
    old: _Matrix, stamp: tuple[int, int], tx: UnitOfWork, tenant_id: str, scope: Scope
) -> _Matrix | None:
    """``old`` plus the vectors written after its last row, when those are all that changed:
    the background pass embeds a partition's memories in ``seq`` order, so after each batch only
    the new rows are read (not the whole partition again). None when anything else changed: a
    vector cleared since (the stamp's ``rewrites``: it may have been written again for the same
    row, which no count shows), a count that does not add up (rows deleted or embedded out of
    order), another size."""
    if not len(old.seqs) or old.stamp[1] != stamp[1]:
        return None
    newer = tx.memories.vectors(tenant_id, scope, after=int(old.seqs[-1]))
    if len(old.seqs) + len(newer.seqs) != tx.memories.vector_count(tenant_id, scope):
        return None
    if not newer.seqs:
        return replace(old, stamp=stamp, unembedded=0)
    if {len(b) for b in newer.blobs} != {old.dim * 4} or old.speakers is None:
        return None
    added = _stacked(newer.blobs)
    seqs = np.concatenate([old.seqs, np.asarray(newer.seqs, dtype=np.int64)])
    speakers = old.speakers | newer.speakers
    if old.codes is None:
        vectors = np.concatenate([old.vectors, added])
        return _coded(_Matrix(stamp, seqs, vectors, speakers=speakers))
    # Only the new rows are quantized.
    codes = Codes.joined([old.codes, Codes.of(added)])
    return replace(old, stamp=stamp, seqs=seqs, codes=codes, speakers=speakers)


def _coded(matrix: _Matrix) -> _Matrix:
    """``matrix`` held as int8 codes if it has ``MIN_ROWS`` rows or more."""
    if len(matrix.seqs) < MIN_ROWS:
        return matrix
    return replace(matrix, vectors=_EMPTY, codes=Codes.of(matrix.vectors))


def _read_matrix(stamp: tuple[int, int], tx: UnitOfWork, tenant_id: str, scope: Scope) -> _Matrix:
    """The partition's vectors read whole, in slices: under ``MIN_ROWS`` rows as float32,
    from ``MIN_ROWS`` on as int8 codes, each slice quantized as it arrives (neither the rows
    nor a float32 matrix of a big partition are ever all in memory: at 100,000 memories on
    PostgreSQL the whole read peaked at 1.45 GB). Rows of one size: the most common one while
    another embedder's vectors are being replaced (``_of_one_size``)."""
    pages = tx.memories.vector_pages(tenant_id, scope, _SLICE)
    seqs: list[int] = []
    head: list[bytes] = []
    speakers: set[str] = set()
    for page in pages:
        seqs.extend(page.seqs)
        head.extend(page.blobs)
        speakers |= page.speakers
        if len(seqs) >= MIN_ROWS:
            break
    else:  # a small partition: float32
        return _of_one_size(stamp, seqs, head, frozenset(speakers))
    size = len(head[0])
    parts = [_quantized_rows(head[i : i + _SLICE], size) for i in range(0, len(head), _SLICE)]
    del head
    for page in pages:
        seqs.extend(page.seqs)
        speakers |= page.speakers
        parts.append(_quantized_rows(page.blobs, size))
    if any(part is None for part in parts):  # vectors of two sizes: read again, whole
        rows = tx.memories.vectors(tenant_id, scope)
        return _of_one_size(stamp, rows.seqs, rows.blobs, rows.speakers)
    coded = Codes.joined([part for part in parts if part is not None])
    at = np.asarray(seqs, dtype=np.int64)
    return _Matrix(stamp, at, _EMPTY, codes=coded, speakers=frozenset(speakers))


def _quantized_rows(blobs: Sequence[bytes], size: int) -> Codes | None:
    """The codes of a slice of rows, all ``size`` bytes long (else None)."""
    if any(len(b) != size for b in blobs):
        return None
    return Codes.of(_stacked(blobs))


def _of_one_size(
    stamp: tuple[int, int], seqs: list[int], blobs: list[bytes], speakers: frozenset[str]
) -> _Matrix:
    """The matrix of the rows of the most common vector size (coded if big enough);
    ``speakers``: those of every row read."""
    if len({len(b) for b in blobs}) > 1:  # another embedder's vectors, until re-embedded
        size = Counter(len(b) for b in blobs).most_common(1)[0][0]
        seqs = [seq for seq, b in zip(seqs, blobs, strict=True) if len(b) == size]
        blobs = [b for b in blobs if len(b) == size]
    at = np.asarray(seqs, dtype=np.int64)
    return _coded(_Matrix(stamp, at, _stacked(blobs), speakers=speakers))


_SLICE = 1024
# A coded matrix's float32 rows: none.
_EMPTY = np.zeros((0, 0), dtype="<f4")


def _stacked(blobs: Sequence[bytes]) -> np.ndarray:
    """The float32 vectors as one matrix, a row each. Vectors of one length (one model) are
    joined and read in one go: stacking 10,000 arrays took three times as long, and a
    partition's matrix is rebuilt on the request after each batch the background pass embeds.
    The caller keeps vectors of one length (one model); several lengths fail (``np.vstack``)."""
    if not blobs:
        return np.zeros((0, 0), dtype="<f4")
    if len({len(b) for b in blobs}) == 1:
        return np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(blobs), -1)
    return np.vstack([np.frombuffer(b, dtype="<f4") for b in blobs])


def without_vectors(matrix: _Matrix | None, seqs: Collection[int]) -> set[int]:
    """The ``seqs`` that have no vector in ``matrix`` (whose ``seqs`` are ascending, as the
    store returns them); all of them when it has none."""
    if matrix is None or not len(matrix.seqs):
        return set(seqs)
    wanted = np.fromiter(seqs, dtype=np.int64, count=len(seqs))
    at = np.searchsorted(matrix.seqs, wanted)
    found = (at < len(matrix.seqs)) & (matrix.seqs[np.minimum(at, len(matrix.seqs) - 1)] == wanted)
    return {int(seq) for seq in wanted[~found]}


__all__ = ["VectorIndex", "without_vectors"]
