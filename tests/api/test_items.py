"""``/v1/items``: the key-value store per scope, through the real app on both backends."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from cairn.services import Services
from cairn.store.items import items as items_t
from tests.api.test_erasure import found_in, sqlite_evidence

SCOPE = {"runtime_id": "langgraph", "user_id": "ada"}
ADDRESS = {**SCOPE, "namespace": ["users", "ada"], "key": "prefs"}


def put(client: TestClient, status: int = 200, **body: Any) -> Any:
    body = {"scope": SCOPE, "namespace": ["users", "ada"], "key": "prefs", **body}
    r = client.put("/v1/items", json=body)
    assert r.status_code == status, r.text
    return r.json()


def error(r: Any, status: int, code: str) -> None:
    assert r.status_code == status, r.text
    assert r.json()["error"]["code"] == code, r.text


def test_put_get_replace_delete(backend_client: TestClient) -> None:
    c = backend_client
    first = put(c, value={"text": "Zoë 🍵 茶", "n": [1, 2.5, None]})
    assert first["namespace"] == ["users", "ada"] and first["expires_at"] is None
    got = c.get("/v1/items", params=ADDRESS).json()
    assert got["value"] == {"text": "Zoë 🍵 茶", "n": [1, 2.5, None]}
    again = put(c, value={"text": "other"})
    assert again["created_at"] == first["created_at"] and again["updated_at"] > first["updated_at"]
    assert c.delete("/v1/items", params=ADDRESS).json() == {"deleted": True}
    assert c.delete("/v1/items", params=ADDRESS).json() == {"deleted": False}
    error(c.get("/v1/items", params=ADDRESS), 404, "item_not_found")


def test_items_are_per_scope(backend_client: TestClient) -> None:
    c = backend_client
    put(c, value={"text": "ada's"})
    for other in ({"runtime_id": "langgraph", "user_id": "bob"}, {"runtime_id": "other"}):
        error(
            c.get("/v1/items", params={**ADDRESS, **other, "user_id": other.get("user_id", "")}),
            404,
            "item_not_found",
        )
        found = c.post("/v1/items/search", json={"scope": other, "query": "ada's"}).json()
        assert found == {"items": []}
        assert c.post("/v1/items/namespaces", json={"scope": other}).json() == {"namespaces": []}


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"namespace": []}, "invalid_namespace"),
        ({"namespace": ["a.b"]}, "invalid_namespace"),
        ({"namespace": [""]}, "invalid_namespace"),
        ({"namespace": ["x" * 129]}, "invalid_namespace"),
        ({"namespace": ["x" * 100] * 6}, "invalid_namespace"),
        ({"namespace": ["x"] * 33}, "invalid_namespace"),
        ({"namespace": [1]}, "validation_error"),
        ({"key": "k" * 1025}, "invalid_key"),  # the codes docs/api.md lists
        ({"value": [1, 2]}, "validation_error"),
        ({"value": "text"}, "validation_error"),
        ({"vectors": [[1.0, 0.0], [1.0]]}, "invalid_vectors"),
        ({"vectors": [[0.5] * 4097]}, "invalid_vectors"),
        ({"vectors": [[0.5]] * 65}, "invalid_vectors"),
        ({"vectors": [[]]}, "invalid_vectors"),
        ({"ttl_seconds": 0}, "invalid_ttl"),
        ({"ttl_seconds": -5}, "invalid_ttl"),
        ({"ttl_seconds": True}, "validation_error"),
        ({"ttl_seconds": 1e12}, "invalid_ttl"),
        ({"scope": {"runtime_id": ""}}, "validation_error"),
        ({"unknown": 1}, "validation_error"),
    ],
)
def test_bad_puts_are_422_and_store_nothing(
    backend_client: TestClient, backend_services: Services, body: dict[str, Any], code: str
) -> None:
    r = backend_client.put(
        "/v1/items", json={"scope": SCOPE, "namespace": ["n"], "key": "k", "value": {}, **body}
    )
    error(r, 422, code)
    with backend_services.store.db.read() as conn:
        assert conn.execute(select(func.count()).select_from(items_t)).scalar_one() == 0


def test_bad_reads_are_422(backend_client: TestClient) -> None:
    c = backend_client
    error(c.get("/v1/items", params={**ADDRESS, "namespace": ["a.b"]}), 422, "invalid_namespace")
    error(c.get("/v1/items", params={**ADDRESS, "namespace": ["x"] * 33}), 422, "invalid_namespace")
    error(c.get("/v1/items", params={"runtime_id": "x", "key": "k"}), 422, "validation_error")
    error(c.delete("/v1/items", params={**ADDRESS, "runtime_id": " "}), 422, "validation_error")
    search = {"scope": SCOPE}
    for body, code in [
        ({"filter": {"n": {"$regex": "x"}}}, "invalid_filter"),
        ({"filter": {"n": {"deep": {"$in": [1]}}}}, "invalid_filter"),
        ({"namespace_prefix": ["a.b"]}, "invalid_namespace"),
        ({"limit": 10_001}, "validation_error"),
        ({"offset": -1}, "validation_error"),
        ({"query_vector": []}, "invalid_vectors"),
        ({"query_vector": [0.5] * 4097}, "invalid_vectors"),
    ]:
        error(c.post("/v1/items/search", json={**search, **body}), 422, code)
    for body, code in [
        ({"prefix": ["a.b"]}, "invalid_namespace"),
        ({"suffix": ["*", ""]}, "invalid_namespace"),
        ({"prefix": ["x"] * 33}, "invalid_namespace"),
        ({"max_depth": -1}, "validation_error"),
    ]:
        error(c.post("/v1/items/namespaces", json={**search, **body}), 422, code)


def test_search_ranks_every_script_by_its_own_words(backend_client: TestClient) -> None:
    c = backend_client
    texts = {
        "zh": "我住在北京。喜欢茉莉花茶",
        "ja": "東京で抹茶を飲みました",
        "ko": "서울에서 김치찌개를 먹어요",
        "ru": "Сестра живёт в Новосибирске",
        "hi": "मेरी बहन दिल्ली में रहती है",
        "ar": "أختي تعيش في القاهرة",
        "en": "My brother plays the violin in Lisbon",
    }
    for lang, text in texts.items():
        put(c, namespace=["notes", lang], key="n", value={"text": text, "lang": lang})
    for lang, query in {
        "zh": "北京",
        "ja": "抹茶",
        "ko": "김치찌개",
        "ru": "Новосибирске",
        "hi": "दिल्ली",
        "ar": "القاهرة",
        "en": "violin",
    }.items():
        hits = c.post("/v1/items/search", json={"scope": SCOPE, "query": query}).json()["items"]
        assert hits[0]["namespace"] == ["notes", lang], (lang, hits)
        assert 0 < hits[0]["score"] <= 1 and all(h["score"] < hits[0]["score"] for h in hits[1:])


def test_caller_vectors_rank_by_cosine(backend_client: TestClient) -> None:
    c = backend_client
    put(c, key="x", value={"t": "x"}, vectors=[[1.0, 0.0], [0.0, 1.0]])
    put(c, key="y", value={"t": "y"}, vectors=[[1.0, 1.0]])
    put(c, key="plain", value={"t": "z"})
    body = {"scope": SCOPE, "query_vector": [0.0, 2.0]}
    hits = c.post("/v1/items/search", json=body).json()["items"]
    assert [h["key"] for h in hits] == ["x", "y", "plain"]
    assert hits[0]["score"] == pytest.approx(1.0) and hits[1]["score"] == pytest.approx(
        0.7071, 1e-3
    )
    assert hits[2]["score"] is None
    # A query vector of another size scores nothing: said, not answered with no scores.
    r = c.post("/v1/items/search", json={**body, "query_vector": [0.0, 1.0, 0.0]})
    error(r, 422, "invalid_vectors")
    assert "has 3 numbers; the items' own vectors have 2" in r.json()["error"]["message"]


def test_erasing_the_scope_or_subject_leaves_no_item(
    backend_client: TestClient, backend_services: Services
) -> None:
    c = backend_client
    put(c, value={"text": "secret"})
    put(c, key="two", value={"text": "secret"}, ttl_seconds=3600)
    subject = {"runtime_id": "default", "user_id": "bob"}
    put(c, scope=subject, value={"text": "bob's"})
    r = c.request("DELETE", "/v1/scopes", params={"user_id": "ada"})
    assert r.status_code == 200 and r.json()["deleted"]["items"] == 2
    assert {"runtime_id": "langgraph", "user_id": "ada", "agent_id": ""} in r.json()["partitions"]
    r = c.delete("/v1/subjects/bob")
    assert r.status_code == 200 and r.json()["deleted"]["items"] == 1
    with backend_services.store.db.read() as conn:
        assert conn.execute(select(func.count()).select_from(items_t)).scalar_one() == 0


def test_namespaces_listing(backend_client: TestClient) -> None:
    c = backend_client
    for ns in (["a", "b", "c"], ["a", "b", "d", "e"], ["a", "c", "f"], ["z"]):
        put(c, namespace=ns, value={})
    ls = lambda **b: c.post("/v1/items/namespaces", json={"scope": SCOPE, **b}).json()  # noqa: E731
    assert ls() == {"namespaces": [["a", "b", "c"], ["a", "b", "d", "e"], ["a", "c", "f"], ["z"]]}
    assert ls(prefix=["a", "*"], max_depth=2)["namespaces"] == [["a", "b"], ["a", "c"]]
    assert ls(suffix=["f"])["namespaces"] == [["a", "c", "f"]]
    assert ls(limit=1, offset=3)["namespaces"] == [["z"]]
    assert ls(prefix=["a%"])["namespaces"] == []  # LIKE characters are literal


def test_the_server_embedder_finds_meaning_without_shared_words(
    semantic_client: TestClient, semantic_services: Services
) -> None:
    """Without the caller's vectors, the server's embedder (the default one here) embeds each
    item's text when it is stored, and a query ranks by meaning too."""
    c = semantic_client
    put(c, key="tea", value={"text": "I adore jasmine tea"})
    put(c, key="car", value={"text": "The car needs new tyres"})
    hits = c.post("/v1/items/search", json={"scope": SCOPE, "query": "favourite hot drink"})
    found = hits.json()["items"]
    assert [h["key"] for h in found] == ["tea", "car"]
    assert 0 <= found[1]["score"] < found[0]["score"] <= 1
    with semantic_services.store.db.read() as conn:
        sources = conn.execute(select(items_t.c.embedding_source)).scalars().all()
    assert sources == [semantic_services.embedder.name] * 2


def test_a_deleted_items_value_leaves_the_database_files(
    backend_client: TestClient, backend_services: Services
) -> None:
    marker = "zqitem" + "7f3a9c"
    put(backend_client, value={"text": f"the alarm code is {marker}"})
    assert backend_client.delete("/v1/items", params=ADDRESS).json() == {"deleted": True}
    if backend_services.store.db.is_sqlite:  # neither the file nor its write-ahead log
        assert found_in(marker, *sqlite_evidence(backend_services)) == []


def test_an_expired_item_is_not_exported(backend_client: TestClient) -> None:
    import time

    c = backend_client
    subject = {"runtime_id": "default", "user_id": "ada"}  # the subject's own partition
    put(c, scope=subject, value={"text": "kept"}, key="kept")
    put(c, scope=subject, value={"text": "ttlsecretword"}, key="brief", ttl_seconds=0.3)

    def exported() -> str:
        r = c.get("/v1/subjects/ada/export")
        assert r.status_code == 200, r.text
        return r.text

    assert "ttlsecretword" in exported() and "kept" in exported()
    time.sleep(0.5)
    brief = {**subject, "namespace": ["users", "ada"], "key": "brief"}
    error(c.get("/v1/items", params=brief), 404, "item_not_found")
    assert "ttlsecretword" not in exported() and "kept" in exported()
