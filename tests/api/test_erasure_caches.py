"""An erasure leaves nothing of the erased text in the process's caches either (the partition's
vector matrix, the tenant's cached query embeddings, token counts, the memos of texts' words
and names), and a cached query embedding is never shared between tenants."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from cairn.app import create_app
from cairn.engine import query as query_module
from cairn.engine.compile import heuristic
from cairn.engine.embedders import HashingEmbedder
from cairn.engine.search_caches import QueryCache
from cairn.services import Services
from tests.api.test_erasure import _ok, world
from tests.conftest import database_url, make_settings

__all__ = ["world"]  # (the fixture, shared with the erasure tests)

USER = "cache-erase"


def _held(services: Services, marker: str) -> list[str]:
    """Where the process's caches still hold ``marker``."""
    caches = services.search_caches
    found = []
    if any(marker in key[2] for key in caches.queries._items):
        found.append("queries")
    if any(marker in text for text in services.tokenizer._counts):
        found.append("token counts")
    if caches.vectors._cache:
        found.append("vector matrices")
    if heuristic._content_words.cache_info().currsize:
        found.append("word memo")
    if query_module._name_terms.cache_info().currsize:
        found.append("name memo")
    if any(
        marker in query
        for _, counts in services.store.db.fts_counts._tables.values()
        for query in counts
    ):
        found.append("match counts")
    return found


@pytest.mark.parametrize("how", ["subject", "scopes", "episode", "memory"])
def test_an_erasure_empties_the_caches_that_held_its_text(world: Any, how: str) -> None:
    client, services = world
    marker = "zq" + secrets.token_hex(4)
    ids = []
    for i, line in enumerate([f"I keep the {marker} key in the blue box.", "Noted, thanks."]):
        body = {
            "subject_id": USER,
            "source": "chat",
            "type": "conversation.turn",
            "session_id": "s1",
            "payload": {"messages": [{"role": "user", "name": "Ada", "content": line}]},
            "occurred_at": f"2025-01-0{i + 1}T10:00:00Z",
        }
        ids.append(_ok(client.post("/v1/episodes", json=body), 201)["id"])
    _ok(client.post("/v1/memories/compile", json={"subject_id": USER}))
    assert services.embedding_backfill is not None
    assert services.embedding_backfill.wait_idle()
    question = f"Where is the {marker} key?"
    _ok(
        client.get(
            "/v1/memories/search", params={"subject_id": USER, "q": question, "hybrid": True}
        )
    )
    _ok(client.post("/v1/context", json={"subject_id": USER, "task": question, "max_tokens": 300}))
    assert "queries" in _held(services, marker)
    assert "token counts" in _held(services, marker)
    if services.store.db.is_sqlite:
        assert "match counts" in _held(services, marker)

    if how == "subject":
        assert client.delete(f"/v1/subjects/{USER}").status_code == 200
    elif how == "scopes":
        assert client.delete("/v1/scopes", params={"user_id": USER}).status_code == 200
    elif how == "episode":
        assert client.delete(f"/v1/episodes/{ids[0]}").status_code == 200
    else:
        found = _ok(client.get("/v1/memories/search", params={"subject_id": USER, "q": marker}))
        for memory in found["memories"]:
            assert client.delete(f"/v1/memories/{memory['id']}").status_code == 200
    assert _held(services, marker) == []


def test_a_document_deletion_empties_the_caches_that_held_its_text(world: Any) -> None:
    """A document's words are searched (match counts, the name memo, the partition's
    matrix); deleting it empties this process's memos at once and its other caches through
    the erasure log within a second."""
    client, services = world
    marker = "zq" + secrets.token_hex(4)
    scope = {"runtime_id": "rt-docs", "user_id": USER, "agent_id": ""}
    body = {
        "scope": scope,
        "dataset_id": "manuals",
        "document_id": "pump",
        "content": f"The pump manual says {marker} before priming.",
    }
    _ok(client.post("/v1/scopes/documents", json=body), 201)
    ask = {
        "scope": scope,
        "query": f"what does the manual say about {marker}",
        "dataset_ids": ["manuals"],
    }
    assert _ok(client.post("/v1/scopes/context", json=ask))["items"]
    assert _held(services, marker)
    params = {**scope, "dataset_id": "manuals", "document_id": "pump"}
    _ok(client.delete("/v1/scopes/documents", params=params))
    deadline = time.monotonic() + 10
    while _held(services, marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _held(services, marker) == []


def test_erasing_nothing_clears_nothing(world: Any) -> None:
    """A subject that holds nothing is a 200 with zero counts, and no cache of anyone is
    emptied for it (nor an erasure logged)."""
    client, services = world
    latest = services.store.erasures.latest()
    heuristic._content_words("some words to remember")
    assert client.delete("/v1/subjects/nobody-here").status_code == 200
    assert heuristic._content_words.cache_info().currsize >= 1
    assert services.store.erasures.latest() == latest


def test_a_cached_query_embedding_is_the_asking_tenants_own() -> None:
    cache = QueryCache()
    embedder = HashingEmbedder()
    try:
        vec = cache.get("tenant-a", embedder, "is John unwell?")
        assert cache.cached("tenant-a", embedder, "is John unwell?") is vec
        assert cache.cached("tenant-b", embedder, "is John unwell?") is None
        other = cache.get("tenant-b", embedder, "is John unwell?")
        assert np.array_equal(vec, other) and other is not vec
        cache.forget("tenant-a")
        assert cache.cached("tenant-a", embedder, "is John unwell?") is None
        assert cache.cached("tenant-b", embedder, "is John unwell?") is other
    finally:
        cache.close()


@pytest.fixture
def two_processes(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Any]:
    """Two servers' services on one database, as two processes of a fleet hold them."""
    url = database_url(backend, tmp_path, request)
    built = []
    try:
        for name in ("a", "b"):
            settings = make_settings(tmp_path / name, database_url=url)
            services = Services.from_settings(settings, embedder=HashingEmbedder())
            built.append(services)
        with (
            TestClient(create_app(services=built[0])) as a,
            TestClient(create_app(services=built[1])) as b,
        ):
            yield (a, built[0]), (b, built[1])
    finally:
        for services in built:
            services.close()


def test_another_process_drops_its_caches_of_what_one_erased(two_processes: Any) -> None:
    (client_a, _), (client_b, services_b) = two_processes
    marker = "zq" + secrets.token_hex(4)
    body = {
        "subject_id": USER,
        "source": "chat",
        "type": "conversation.turn",
        "payload": {"messages": [{"role": "user", "content": f"The {marker} key is blue."}]},
    }
    _ok(client_b.post("/v1/episodes", json=body), 201)
    _ok(client_b.post("/v1/memories/compile", json={"subject_id": USER}))
    assert services_b.embedding_backfill is not None
    assert services_b.embedding_backfill.wait_idle()
    question = f"Which {marker} key?"
    params = {"subject_id": USER, "q": question, "hybrid": True}
    assert _ok(client_b.get("/v1/memories/search", params=params))["memories"]
    _ok(client_b.post("/v1/context", json={"subject_id": USER, "task": question}))
    held = _held(services_b, marker)
    assert {"queries", "token counts", "vector matrices"} <= set(held)

    assert client_a.delete(f"/v1/subjects/{USER}").status_code == 200
    deadline = time.monotonic() + 10
    while _held(services_b, marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _held(services_b, marker) == []
