"""A big partition's vectors held as int8 codes (``cairn.engine.int8_dots``): the graph, the
codes, the products' accuracy, and the vector lane over such a partition."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from cairn.core.episodes import NewEpisode
from cairn.core.scope import Scope
from cairn.engine import vectors as vectors_module
from cairn.engine.compile import compile_scope
from cairn.engine.embedders import HashingEmbedder
from cairn.engine.int8_dots import GRAPH, QUERY_OFFSET, Codes, Int8Dots, query_codes
from cairn.engine.search import embed_memories, search_memories
from cairn.engine.search_caches import SearchCaches
from cairn.store import Store

TENANT = "t-int8"


def _unit_rows(rng: np.random.Generator, rows: int, dim: int) -> np.ndarray:
    m = rng.standard_normal((rows, dim)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def test_the_graph_is_the_one_onnx_builds() -> None:
    """The bytes kept in the module are ``MatMulInteger(query uint8 [1, dim], codes int8
    [dim, rows]) → int32 [1, rows]``, as ``onnx.helper`` writes it and its checker accepts."""
    import onnx
    from onnx import TensorProto, helper

    query = helper.make_tensor_value_info("query", TensorProto.UINT8, [1, "dim"])
    codes = helper.make_tensor_value_info("codes", TensorProto.INT8, ["dim", "rows"])
    dots = helper.make_tensor_value_info("dots", TensorProto.INT32, [1, "rows"])
    node = helper.make_node("MatMulInteger", ["query", "codes"], ["dots"])
    graph = helper.make_graph([node], "int8_dots", [query, codes], [dots])
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 10)], producer_name="cairn"
    )
    model.ir_version = 5
    onnx.checker.check_model(model)
    assert model.SerializeToString(deterministic=True) == GRAPH


def test_codes_hold_each_row_to_half_a_step() -> None:
    rng = np.random.default_rng(3)
    m = _unit_rows(rng, 50, 32)
    m[7] = 0.0  # a row of zeros keeps scale 1 and codes of 0
    got = Codes.of(m)
    rows, scales = got.columns.T, got.scales
    assert got.columns.dtype == np.int8 and scales.dtype == np.float32
    assert got.columns.shape == (32, 50) and got.columns.flags.c_contiguous
    assert (got.rows, got.dim) == (50, 32)
    back = rows.astype(np.float32) * scales[:, None]
    assert np.all(np.abs(back - m) <= scales[:, None] / 2 + 1e-7)
    assert scales[7] == 1.0 and np.all(rows[7] == 0)
    # Each row's largest value is ±127 steps: the whole int8 range is used.
    assert np.all(np.abs(rows[np.arange(50) != 7].astype(int)).max(axis=1) == 127)
    assert np.array_equal(got.sums, rows.astype(np.int64).sum(axis=1))
    assert got.nbytes == got.columns.nbytes + scales.nbytes + got.sums.nbytes
    # Joined from parts: the codes of the whole.
    whole = Codes.joined([Codes.of(m[:20]), Codes.of(m[20:])])
    assert np.array_equal(whole.columns, got.columns) and np.array_equal(whole.sums, got.sums)
    assert np.array_equal(whole.scales, scales)


def test_products_are_the_cosines_to_within_0_0035() -> None:
    """Over 6,000 random unit rows of 384 values (and three near copies of the query planted
    among them), the ``n`` rows found score within 0.0035 of their exact cosine, the planted
    rows come first in their order, and the rows found are the exact ``n`` best but for ties
    closer than the error."""
    rng = np.random.default_rng(11)
    m = _unit_rows(rng, 6000, 384)
    query = _unit_rows(rng, 1, 384)[0]
    for row, noise in ((4000, 0.2), (17, 0.4), (2500, 0.6)):
        near = query + noise * _unit_rows(rng, 1, 384)[0]
        m[row] = near / np.linalg.norm(near)
    exact = m @ query
    codes = Codes.of(m)
    dots = Int8Dots()
    rows, sims = dots.nearest(codes, query, 50)
    assert len(rows) == 50 and len(set(rows.tolist())) == 50
    assert np.max(np.abs(sims - exact[rows])) < 0.0035
    order = rows[np.argsort(-sims)]
    assert order[:3].tolist() == [4000, 17, 2500]
    best = set(np.argsort(-exact)[:50].tolist())
    missed = best - set(rows.tolist())
    # A row of the exact 50 may be left out only for one that scores within the error of it.
    cut = np.sort(exact)[-50]
    assert all(abs(exact[r] - cut) < 0.007 for r in missed)
    # All rows when asked for more than there are; none for none.
    rows, sims = dots.nearest(Codes.of(m[:10]), query, 99)
    assert sorted(rows.tolist()) == list(range(10))
    assert np.max(np.abs(sims - exact[rows])) < 0.0035
    assert len(dots.nearest(codes, query, 0)[0]) == 0


def test_products_are_exact_integers() -> None:
    """The kernel's products, after the query's shift is taken off, are exactly the integer
    dot products of the codes (int64 arithmetic in numpy)."""
    rng = np.random.default_rng(2)
    codes = Codes.of(_unit_rows(rng, 700, 96))
    for _ in range(5):
        q_codes, _ = query_codes(_unit_rows(rng, 1, 96)[0])
        exact = codes.columns.T.astype(np.int64) @ q_codes.astype(np.int64)
        assert np.array_equal(Int8Dots().products(codes, q_codes), exact)


def _saturating_dots(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """``left · right`` (``left`` unsigned, a row; ``right`` signed, a column per result) as
    onnxruntime's u8·s8 kernel computes it on x86 without VNNI (``vpmaddubsw``): each two
    neighbouring products summed into a saturating int16."""
    pairs = (left.astype(np.int64)[:, None] * right.astype(np.int64)).reshape(-1, 2, right.shape[1])
    return np.clip(pairs.sum(axis=1), -32768, 32767).sum(axis=0)


def test_no_two_neighbouring_products_overflow_sixteen_bits() -> None:
    """A row equal to the query, its largest values side by side: the query shifted into
    1..127 times the codes (up to ±127) never overflows a 16-bit pair sum, so the products are
    the same with or without VNNI and the row scores its cosine of 1. (Shifted by 128 the pair
    would be 191 x 127 + 190 x 126 = 48,197 and the score far off.)"""
    q = np.zeros(64, dtype=np.float32)
    q[[10, 11, 20, 21, 40]] = [1.0, 0.99, -1.0, -0.99, 0.3]
    q /= np.linalg.norm(q)
    codes = Codes.of(q[None, :])
    q_codes, q_scale = query_codes(q)
    assert int(np.abs(q_codes).max()) == 63
    shifted = q_codes.astype(np.int64) + QUERY_OFFSET
    assert shifted.min() >= 1 and shifted.max() <= 127
    exact = shifted @ codes.columns.astype(np.int64)
    assert np.array_equal(_saturating_dots(shifted, codes.columns), exact)
    by_128 = _saturating_dots(shifted + 64, codes.columns)
    assert not np.array_equal(by_128, exact + 64 * codes.sums)
    cosine = (exact - QUERY_OFFSET * codes.sums) * codes.scales * q_scale
    assert abs(float(cosine[0]) - 1.0) < 0.0035
    _, sims = Int8Dots().nearest(codes, q, 1)
    assert abs(float(sims[0]) - 1.0) < 0.0035


def _scope_with_memories(store: Store, texts: list[str]) -> Scope:
    scope = Scope.for_subject("int8")
    store.episodes.append_many(
        TENANT,
        [NewEpisode(scope=scope, source="t", type="note", payload={"text": t}) for t in texts],
    )
    while compile_scope(store, TENANT, scope).has_more:
        pass
    return scope


def test_a_big_partition_is_held_as_codes_and_grows_by_its_new_rows(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Below ``MIN_ROWS`` rows a partition's matrix is float32; once it reaches it the matrix
    is codes, and rows embedded after it are quantized and appended (the same codes as the
    whole matrix quantized at once)."""
    monkeypatch.setattr(vectors_module, "MIN_ROWS", 4)
    scope = _scope_with_memories(store, [f"note number {i} about topic {i % 3}" for i in range(9)])
    emb = HashingEmbedder()
    index = vectors_module.VectorIndex()

    def matrix() -> Any:
        with store.snapshot() as tx:
            return index.matrix(store, tx, TENANT, scope)

    assert embed_memories(store, emb, TENANT, scope, batch=3, max_batches=1) == 3
    small = matrix()
    assert small.codes is None and small.vectors.dtype == np.float32 and small.dim > 0
    assert embed_memories(store, emb, TENANT, scope, batch=3, max_batches=1) == 3
    coded = matrix()
    assert coded.codes is not None and coded.vectors.size == 0
    assert coded.dim == small.dim and len(coded.seqs) == 6 and coded.codes.rows == 6
    assert coded.nbytes == coded.seqs.nbytes + coded.codes.nbytes
    assert embed_memories(store, emb, TENANT, scope) == 3
    grown = matrix()
    assert grown.codes is not None and len(grown.seqs) == 9
    assert np.array_equal(grown.codes.columns[:, :6], coded.codes.columns)
    with store.snapshot() as tx:
        rows = tx.memories.vectors(TENANT, scope)
    whole = Codes.of(np.frombuffer(b"".join(rows.blobs), dtype="<f4").reshape(len(rows.blobs), -1))
    _assert_same_codes(grown.codes, whole)
    assert grown.seqs.tolist() == list(rows.seqs)
    # Read whole by another index (quantized a slice at a time): the same matrix.
    monkeypatch.setattr(vectors_module, "_SLICE", 2)
    with store.snapshot() as tx:
        fresh = vectors_module.VectorIndex().matrix(store, tx, TENANT, scope)
    assert fresh is not grown and fresh.codes is not None
    _assert_same_codes(fresh.codes, whole)
    assert fresh.seqs.tolist() == list(rows.seqs)


def _assert_same_codes(got: Codes, want: Codes) -> None:
    assert np.array_equal(got.columns, want.columns) and got.columns.flags.c_contiguous
    assert np.array_equal(got.scales, want.scales) and np.array_equal(got.sums, want.sums)


def test_the_vector_lane_over_codes_ranks_as_over_float32(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same semantic and hybrid searches over a partition held as codes and as float32:
    the same memories first, every vector score within 0.0035 of the exact one."""
    texts = [
        "I adopted a golden retriever puppy named Max last spring.",
        "We went hiking in the Rocky Mountains in July 2022.",
        "My sister is a nurse at the city hospital.",
        "I started pottery classes, the clay bowls came out great.",
        "I work at Acme Corp as a data engineer.",
        "Zebra crossing stripes are painted white.",
    ]
    scope = _scope_with_memories(store, texts)
    emb = HashingEmbedder()
    embed_memories(store, emb, TENANT, scope)
    found: dict[int, list[Any]] = {}
    for min_rows in (10**9, 1):  # float32, then codes
        monkeypatch.setattr(vectors_module, "MIN_ROWS", min_rows)
        caches = SearchCaches()
        try:
            found[min_rows] = [
                search_memories(store, TENANT, scope, q, embedder=emb, lanes=lanes, caches=caches)
                for q in ("clay bowls pottery", "where does she work", "zebra stripes")
                for lanes in (["vector"], None)
            ]
            with store.snapshot() as tx:
                matrix = caches.vectors.matrix(store, tx, TENANT, scope)
            assert (matrix.codes is not None) == (min_rows == 1)
        finally:
            caches.close()
    for exact, coded in zip(found[10**9], found[1], strict=True):
        assert exact and exact[0].memory.id == coded[0].memory.id
        by_id = {r.memory.id: r.lanes["vector"] for r in exact}
        assert {r.memory.id for r in coded} == set(by_id)
        assert all(abs(r.lanes["vector"] - by_id[r.memory.id]) < 0.0035 for r in coded)


def test_a_big_partition_with_vectors_of_two_sizes_keeps_the_common_one(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While another embedder's vectors replace a big partition's, a whole read (in slices)
    keeps the rows of the most common size, coded; the others wait to be embedded again."""
    monkeypatch.setattr(vectors_module, "MIN_ROWS", 4)
    monkeypatch.setattr(vectors_module, "_SLICE", 2)
    scope = _scope_with_memories(store, [f"note {i} on subject {i % 4}" for i in range(9)])
    with store.snapshot() as tx:
        seqs = [seq for seq, _, _ in tx.memories.without_embedding(TENANT, scope)]
    rng = np.random.default_rng(5)
    common, other = _unit_rows(rng, 6, 16), _unit_rows(rng, 3, 24)
    # The first row read (which a slice's size is checked against) is of the odd size.
    order = [seqs[0], *rng.permutation(seqs[1:]).tolist()]
    rows = [(seq, v.tobytes()) for seq, v in zip(order[3:], common, strict=True)]
    rows += [(seq, v.tobytes()) for seq, v in zip(order[:3], other, strict=True)]
    with store.transaction() as tx:
        tx.memories.set_embeddings(TENANT, scope, rows)
    with store.snapshot() as tx:
        matrix = vectors_module.VectorIndex().matrix(store, tx, TENANT, scope)
    assert matrix.codes is not None and matrix.dim == 16
    kept = {seq for seq, blob in rows if len(blob) == 16 * 4}
    assert set(matrix.seqs.tolist()) == kept and len(kept) == 6
    by_seq = {seq: np.frombuffer(blob, dtype="<f4") for seq, blob in rows}
    _assert_same_codes(matrix.codes, Codes.of(np.stack([by_seq[int(seq)] for seq in matrix.seqs])))
