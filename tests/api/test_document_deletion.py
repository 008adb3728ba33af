"""Deleting one document of a dataset leaves nothing of it, on both backends: every version
stored of it (one per idempotency key) goes with its chunks, no row, index entry or (SQLite)
byte of the database file and its write-ahead log keeps its text, the scope's other documents
and another scope's document of the same id stay, and putting it again stores it anew."""

from __future__ import annotations

import secrets
from typing import Any

from tests.api.test_erasure import _ok, found_in, rows_text, sqlite_evidence, world

__all__ = ["world"]  # (the fixture, shared with the erasure tests)

SCOPE = {"runtime_id": "rt-docs", "user_id": "reader", "agent_id": ""}
OTHER = {"runtime_id": "rt-docs", "user_id": "another-reader", "agent_id": ""}


def _put(client: Any, scope: dict[str, str], doc: str, text: str, key: str = "") -> Any:
    body = {"scope": scope, "dataset_id": "manuals", "document_id": doc, "content": text}
    if key:
        body["idempotency_key"] = key
    return client.post("/v1/scopes/documents", json=body)


def _found(client: Any, scope: dict[str, str], query: str) -> list[str]:
    body = {"scope": scope, "query": query, "dataset_ids": ["manuals"]}
    items = _ok(client.post("/v1/scopes/context", json=body))["items"]
    return [item["content"] for item in items]


def test_deleting_a_document_removes_every_version_and_nothing_else(world: Any) -> None:
    client, services = world
    gone, kept, theirs = ("zq" + secrets.token_hex(6) for _ in range(3))
    _ok(_put(client, SCOPE, "pump", f"The pump manual says {gone} before priming."), 201)
    _ok(_put(client, SCOPE, "pump", f"Second edition: {gone} after priming.", "pump-v2"), 201)
    _ok(_put(client, SCOPE, "valve", f"The valve manual says {kept}."), 201)
    _ok(_put(client, OTHER, "pump", f"Their pump manual says {theirs}."), 201)
    assert len(_found(client, SCOPE, gone)) == 2

    params = {**SCOPE, "dataset_id": "manuals", "document_id": "pump"}
    r = _ok(client.delete("/v1/scopes/documents", params=params))
    assert (r["documents_deleted"], r["chunks_deleted"]) == (2, 2)
    assert r["scope"] == SCOPE and r["document_id"] == "pump"
    assert _found(client, SCOPE, gone) == []
    assert _found(client, SCOPE, kept) and _found(client, OTHER, theirs)
    everything = rows_text(services)
    assert gone not in everything and kept in everything and theirs in everything
    if services.store.db.is_sqlite:
        assert found_in(gone, *sqlite_evidence(services)) == []

    missing = client.delete("/v1/scopes/documents", params=params)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "document_not_found"
    # Deleted means the key is free again: the same document is stored anew.
    assert _put(client, SCOPE, "pump", f"Third edition: {gone}.").status_code == 201
    assert len(_found(client, SCOPE, gone)) == 1


def test_deleting_a_document_refuses_bad_input(world: Any) -> None:
    client, _ = world
    _ok(_put(client, SCOPE, "pump", "The pump manual."), 201)
    base = {**SCOPE, "dataset_id": "manuals", "document_id": "pump"}
    for params, status in (
        ({k: v for k, v in base.items() if k != "runtime_id"}, 422),
        ({**base, "document_id": "  "}, 422),
        ({**base, "dataset_id": "x" * 300}, 422),
        ({**base, "user_id": "someone-else"}, 404),  # another partition holds no such document
        ({**base, "document_id": "Pump"}, 404),
    ):
        r = client.delete("/v1/scopes/documents", params=params)
        assert r.status_code == status, (params, r.text)
        assert r.json()["error"]["code"] in ("validation_error", "document_not_found")
    assert _found(client, SCOPE, "pump manual")  # nothing was deleted
