"""The vector lane's products for a big partition, from int8 codes of its vectors.

Reading a partition's float32 matrix was most of the vector lane's time: the scale benchmark's
10,299 memories are 37 MB with the default embedder, more than the processor's caches hold, so
every query streamed them from memory (3.8 ms of an 18 ms hybrid context request,
docs/benchmarks.md, session 20). A partition of ``MIN_ROWS`` memories or more is held instead
as int8 codes (each row's values over ``scale = max |value| / 127``, rounded: a quarter of the
bytes), and onnxruntime's integer product (``MatMulInteger``, the kernel the default embedder
already runs) scores every row against the query's own codes.

The query is coded in ``QUERY_LEVELS`` = 63 steps each way, not 127: on x86 processors without
VNNI onnxruntime's kernel (``vpmaddubsw``) adds each two neighbouring byte products into a
saturating 16-bit sum, which codes up to 255 times a query up to ±127 could overflow (a row
close to the query the most: its top match would lose up to 0.01), while 2 x 255 x 63 = 32,130
cannot. A score is then the cosine to within about 0.003 (the rounding of both sides: measured
at most 0.0032 over 120 queries of the scale benchmark's 10,000-memory subject, some of them a
row itself, median 0.0018); scores that close may swap places. The lane weighs cosines by 0.3
(0.6 for a query outside English), so a fused score moves by about 0.002 at most. Smaller
partitions keep their float32
matrix and exact cosines (it fits the caches: no faster through codes). Keeping the float32
rows too, to score the best few hundred candidates again exactly, cost as much as it saved:
gathering those rows from the cold matrix took 1.5 ms in a server.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

# Below this many rows a partition keeps its float32 matrix (as fast, and exact).
MIN_ROWS = 4096
# ``codes (rows x d, uint8) · query (d x 1, int8) → dots (rows x 1, int32)`` as an ONNX model
# (opset 10, IR 5; ``tests/engine/test_int8_dots.py`` rebuilds it with ``onnx.helper``). Kept
# as bytes so a server never imports ``onnx``.
GRAPH = bytes.fromhex(
    "08051205636169726e3a88010a230a05636f6465730a0571756572791204646f7473220d4d61744d756c49"
    "6e74656765721209696e74385f646f74735a1e0a05636f64657312150a130802120f0a061204726f77730a"
    "05120364696d5a1a0a05717565727912110a0f0803120b0a05120364696d0a020801621a0a04646f747312"
    "120a100806120c0a061204726f77730a02080142040a00100a"
)
# A query's values over ``max |value| / QUERY_LEVELS``, rounded (see the module's docstring).
QUERY_LEVELS = 63
# The codes are stored offset by 128 (uint8: onnxruntime's fastest integer kernel takes
# unsigned rows); the product's ``128 Σ q`` is taken off afterwards.
OFFSET = 128


def quantized(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, scales)`` of a float32 matrix: each row's values over ``scale = max |v| /
    127``, rounded, plus ``OFFSET`` (uint8); a row of zeros has scale 1."""
    peak = np.abs(vectors).max(axis=1) if len(vectors) else np.zeros(0, dtype=np.float32)
    scales = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
    steps = vectors / scales[:, None]
    np.rint(steps, out=steps)
    steps += OFFSET
    return steps.astype(np.uint8), scales


def query_codes(query: np.ndarray) -> tuple[np.ndarray, float]:
    """``(codes, scale)`` of a query: its values over ``scale = max |value| / QUERY_LEVELS``,
    rounded (int8); a query of zeros has scale 1."""
    peak = float(np.abs(query).max()) if len(query) else 0.0
    scale = peak / QUERY_LEVELS if peak > 0 else 1.0
    return np.rint(query / scale).astype(np.int8), scale


class Int8Dots:
    """The integer product's onnxruntime session, built on first use; thread-safe (a session
    runs concurrent calls). One per ``VectorIndex``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._session: Any = None

    def _run(self, codes: np.ndarray, query: np.ndarray) -> np.ndarray:
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
        out = session.run(None, {"codes": codes, "query": query.reshape(-1, 1)})[0]
        return np.asarray(out, dtype=np.int64).reshape(-1)

    def nearest(
        self, codes: np.ndarray, scales: np.ndarray, query: np.ndarray, n: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """Row indices of the ``n`` largest products of the rows coded in ``codes`` /
        ``scales`` (``quantized``) with ``query``, and those products (in no particular
        order)."""
        rows = len(codes)
        n = min(n, rows)
        if n <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        q_codes, q_scale = query_codes(query)
        dots = self._run(codes, q_codes) - OFFSET * int(q_codes.astype(np.int64).sum())
        sims = dots.astype(np.float32) * (scales * np.float32(q_scale))
        top = np.argpartition(-sims, n - 1)[:n] if n < rows else np.arange(rows)
        return top, sims[top]


__all__ = ["MIN_ROWS", "Int8Dots", "quantized", "query_codes"]
