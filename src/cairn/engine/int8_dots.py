"""The vector lane's products for a big partition, from int8 codes of its vectors.

Reading a partition's float32 matrix was most of the vector lane's time: the scale benchmark's
10,299 memories are 37 MB with the default embedder, more than the processor's caches hold, so
every query streamed them from memory (3.8 ms of an 18 ms hybrid context request,
docs/benchmarks.md, session 20). A partition of ``MIN_ROWS`` memories or more is held instead
as int8 codes (each row's values over ``scale = max |value| / 127``, rounded: a quarter of the
bytes), and onnxruntime's integer product (``MatMulInteger``, the kernel the default embedder
already runs) scores every row against the query's own codes.

The codes are held a column per memory (``dim x rows``) and the query is the product's left
operand (``1 x dim``): about 0.25 ms for 10,299 memories of 896 values, where the codes a row per
memory against the query as a column took 1.5-3 ms (measured: docs/benchmarks.md, session 25;
onnxruntime's integer kernel is far slower with the big matrix on the left).

The query is coded in ``QUERY_LEVELS`` = 63 steps each way and shifted by ``QUERY_OFFSET`` =
64 into 1..127 (the kernel's left operand is unsigned). On x86 processors without VNNI
onnxruntime's u8·s8 kernel (``vpmaddubsw``) adds each two neighbouring byte products into a
saturating 16-bit sum: 2 x 127 x 127 = 32,258 cannot overflow it, a query up to 255 could
(the rows closest to the query the most). The shift adds ``64 x`` each column's sum to its
product, kept per memory and taken off. A score is then the cosine to within about 0.003 (the
rounding of both sides: measured at most 0.0032 over 120 queries of the scale benchmark's
10,000-memory subject, some of them a row itself, median 0.0018); scores that close may swap
places. The lane weighs cosines by 0.3 (0.6 for a query outside English), so a fused score
moves by about 0.002 at most. Smaller partitions keep their float32 matrix and exact cosines
(it fits the caches). Keeping the float32 rows too, to score the best few hundred candidates
again exactly, cost as much as it saved: gathering those rows from the cold matrix took 1.5 ms
in a server.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

# Below this many rows a partition keeps its float32 matrix: exact cosines, at a cost still
# small (a 4,096 x 896 matrix is 15 MB).
MIN_ROWS = 4096
# ``query (1 x dim, uint8) · codes (dim x rows, int8) → dots (1 x rows, int32)`` as an ONNX
# model (opset 10, IR 5; ``tests/engine/test_int8_dots.py`` rebuilds it with ``onnx.helper``).
# Kept as bytes so a server never imports ``onnx``.
GRAPH = bytes.fromhex(
    "08051205636169726e3a88010a230a0571756572790a05636f6465731204646f7473220d4d61744d756c49"
    "6e74656765721209696e74385f646f74735a1a0a05717565727912110a0f0802120b0a0208010a05120364"
    "696d5a1e0a05636f64657312150a130803120f0a05120364696d0a061204726f7773621a0a04646f747312"
    "120a100806120c0a0208010a061204726f777342040a00100a"
)
# A query's values over ``max |value| / QUERY_LEVELS``, rounded, then shifted by
# ``QUERY_OFFSET`` into 1..127 (see the module's docstring).
QUERY_LEVELS = 63
QUERY_OFFSET = 64


@dataclass(frozen=True)
class Codes:
    """A matrix's rows as int8 codes: ``columns`` (``dim x rows``, a column per row), each
    row's ``scales`` (``max |value| / 127``; 1 for a row of zeros) and ``sums`` (its codes'
    sum, for the query's shift)."""

    columns: np.ndarray
    scales: np.ndarray
    sums: np.ndarray

    @classmethod
    def of(cls, vectors: np.ndarray) -> Codes:
        """The codes of a float32 matrix (a row per vector)."""
        peak = np.abs(vectors).max(axis=1) if len(vectors) else np.zeros(0, dtype=np.float32)
        scales = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
        steps = vectors / scales[:, None]
        np.rint(steps, out=steps)
        rows = steps.astype(np.int8)
        return cls(np.ascontiguousarray(rows.T), scales, rows.sum(axis=1, dtype=np.int64))

    @classmethod
    def joined(cls, parts: Sequence[Codes]) -> Codes:
        """One matrix of ``parts``' rows, in order."""
        return cls(
            np.concatenate([p.columns for p in parts], axis=1),
            np.concatenate([p.scales for p in parts]),
            np.concatenate([p.sums for p in parts]),
        )

    @property
    def rows(self) -> int:
        return int(self.columns.shape[1])

    @property
    def dim(self) -> int:
        return int(self.columns.shape[0])

    @property
    def nbytes(self) -> int:
        return int(self.columns.nbytes + self.scales.nbytes + self.sums.nbytes)


def query_codes(query: np.ndarray) -> tuple[np.ndarray, float]:
    """``(codes, scale)`` of a query: its values over ``scale = max |value| / QUERY_LEVELS``,
    rounded (int8, unshifted); a query of zeros has scale 1."""
    peak = float(np.abs(query).max()) if len(query) else 0.0
    scale = peak / QUERY_LEVELS if peak > 0 else 1.0
    return np.rint(query / scale).astype(np.int8), scale


class Int8Dots:
    """The integer product's onnxruntime session, built on first use; thread-safe (a session
    runs concurrent calls). One per ``VectorIndex``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._session: Any = None

    def products(self, codes: Codes, query: np.ndarray) -> np.ndarray:
        """Each row's exact integer product with the query's codes ``query`` (int8)."""
        with self._lock:
            if self._session is None:
                import onnxruntime

                options = onnxruntime.SessionOptions()
                # One thread: a pool's wake-ups cost more than a 10,000-row product.
                options.intra_op_num_threads = 1
                options.inter_op_num_threads = 1
                self._session = onnxruntime.InferenceSession(
                    GRAPH, options, providers=["CPUExecutionProvider"]
                )
            session = self._session
        shifted = (query.astype(np.int16) + QUERY_OFFSET).astype(np.uint8).reshape(1, -1)
        out = session.run(None, {"query": shifted, "codes": codes.columns})[0]
        dots: np.ndarray = np.asarray(out, dtype=np.int64).reshape(-1)
        dots -= QUERY_OFFSET * codes.sums
        return dots

    def nearest(self, codes: Codes, query: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Row indices of the ``n`` largest products of ``codes``' rows with ``query``, and
        those products (in no particular order)."""
        rows = codes.rows
        n = min(n, rows)
        if n <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        q_codes, q_scale = query_codes(query)
        dots = self.products(codes, q_codes)
        sims = dots.astype(np.float32) * (codes.scales * np.float32(q_scale))
        top = np.argpartition(-sims, n - 1)[:n] if n < rows else np.arange(rows)
        return top, sims[top]


__all__ = ["MIN_ROWS", "Codes", "Int8Dots", "query_codes"]
