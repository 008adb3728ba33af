"""An import refuses what Cairn's own writes never make (naming the record and the field, and
storing nothing of the call), takes what only looks incomplete, and says which records it
skipped and why. Both backends."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient

from cairn.api.routes.lifecycle import MAX_CONTENT

SRC, DST = "src", "dst"
SCOPE = {"runtime_id": "default", "user_id": SRC}


def _ok(r: Any, status: int = 200) -> Any:
    assert r.status_code == status, r.text[:400]
    return r.json()


def _episode(text: str, session: str = "s1") -> dict[str, Any]:
    return {
        "subject_id": SRC,
        "source": "chat",
        "type": "conversation.turn",
        "session_id": session,
        "payload": {"messages": [{"role": "user", "content": text}]},
    }


def _export(client: TestClient, subject: str) -> list[dict[str, Any]]:
    r = client.get(f"/v1/subjects/{subject}/export")
    return [json.loads(line) for line in r.text.splitlines()][1:]  # the header aside


def _import(client: TestClient, subject: str, records: list[dict[str, Any]]) -> Any:
    return client.post(f"/v1/subjects/{subject}/import", json={"records": records})


@pytest.fixture
def lines(backend_client: TestClient) -> list[dict[str, Any]]:
    """The export of a subject with episodes, memories and an item (header line first)."""
    client = backend_client
    for text in ("I work at the FBI in Washington.", "I like green tea."):
        _ok(client.post("/v1/episodes", json=_episode(text)), 201)
    _ok(client.post("/v1/memories/compile", json={"subject_id": SRC}))
    item = {"scope": SCOPE, "namespace": ["prefs"], "key": "tea", "value": {"text": "jasmine"}}
    _ok(client.put("/v1/items", json=item))
    r = client.get(f"/v1/subjects/{SRC}/export")
    return [json.loads(line) for line in r.text.splitlines()]


def _first(lines: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    return dict(next(line["row"] for line in lines if line["type"] == kind))


def _refused(client: TestClient, records: list[dict[str, Any]], *words: str) -> None:
    """The whole call is a 422 ``invalid_import`` naming the last record and ``words``, and
    nothing of it is stored."""
    before = _export(client, DST)
    r = _import(client, DST, records)
    assert r.status_code == 422, r.text[:400]
    error = r.json()["error"]
    assert error["code"] == "invalid_import", error
    assert error["message"].startswith(f"record {len(records) - 1}: "), error
    for word in words:
        assert word in error["message"], error
    assert _export(client, DST) == before


@pytest.mark.parametrize("when", ["9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00"])
def test_a_time_out_of_range_in_utc_names_its_record_and_field(
    backend_client: TestClient, lines: list[dict[str, Any]], when: str
) -> None:
    episode, memory = _first(lines, "episode"), _first(lines, "memory")
    for kind, row, field in (
        ("episode", episode, "occurred_at"),
        ("episode", episode, "created_at"),
        ("memory", memory, "valid_from"),
        ("memory", memory, "created_at"),
        ("item", _first(lines, "item"), "expires_at"),
    ):
        bad = {"type": kind, "row": {**row, field: when}}
        _refused(backend_client, [*lines, bad], field, "outside the representable range")
    assert _export(backend_client, DST) == []


def test_a_time_without_an_offset_is_utc(
    backend_client: TestClient, lines: list[dict[str, Any]]
) -> None:
    """As the API reads one (it was compared with aware times, a 500)."""
    memory = {**_first(lines, "memory"), "valid_from": "2026-01-01T00:00:00"}
    memory["valid_to"] = "2026-02-01T00:00:00+00:00"
    result = _ok(_import(backend_client, DST, [{"type": "memory", "row": memory}]))
    assert result["imported"]["memory"] == 1
    stored = next(r["row"] for r in _export(backend_client, DST) if r["type"] == "memory")
    assert stored["valid_from"] == "2026-01-01T00:00:00.000000Z"  # written as the API writes


def test_a_version_link_cairn_never_makes_is_refused(
    backend_client: TestClient, lines: list[dict[str, Any]]
) -> None:
    memory = _first(lines, "memory")
    fresh = str(uuid.uuid4())
    for row, words in (
        ({**memory, "superseded_by": str(uuid.uuid4())}, ("active memory", "superseded_by")),
        ({**memory, "id": fresh, "status": "superseded", "superseded_by": fresh}, ("itself",)),
        ({**memory, "id": fresh, "status": "deleted", "superseded_by": fresh}, ("itself",)),
    ):
        _refused(backend_client, [*lines, {"type": "memory", "row": row}], *words)
    assert _export(backend_client, DST) == []


def test_item_limits_are_those_of_put_items(
    backend_client: TestClient, lines: list[dict[str, Any]]
) -> None:
    item = _first(lines, "item")
    for changes, words in (
        ({"namespace": "a." * 33}, ("more than 32 labels",)),
        ({"namespace": "a" * 129 + "."}, ("namespace[0]", "128")),
        ({"namespace": ("a" * 100 + ".") * 6}, ("longer than 512",)),
        ({"key": "k" * 1025}, ("key", "1024")),
        ({"ttl_seconds": 11 * 366 * 86400.0}, ("ttl_seconds", "ten years")),
        ({"ttl_seconds": 0}, ("ttl_seconds",)),
    ):
        _refused(backend_client, [*lines, {"type": "item", "row": {**item, **changes}}], *words)
    assert _export(backend_client, DST) == []


def test_a_compiled_memory_longer_than_a_correction_round_trips(
    backend_client: TestClient,
) -> None:
    """A compile keeps a long message whole in its turn memory: PATCH's cap on a correction's
    new text is no limit of an import, which must take back every export Cairn makes."""
    client = backend_client
    text = " ".join(f"w{i}" for i in range(20_000))  # 128,889 characters
    _ok(client.post("/v1/episodes", json=_episode(text)), 201)
    _ok(client.post("/v1/memories/compile", json={"subject_id": SRC}))
    records = _export(client, SRC)
    longest = max(len(r["row"]["content"]) for r in records if r["type"] == "memory")
    assert longest > MAX_CONTENT
    result = _ok(_import(client, DST, records))
    assert result["skipped"] == 0 and result["imported"]["memory"] > 0
    copied = [r["row"]["content"] for r in _export(client, DST) if r["type"] == "memory"]
    assert max(len(c) for c in copied) == longest


def _same_content(memory: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A memory record under a fresh id with a stored memory's kind and content hash."""
    return {"type": "memory", "row": {**memory, "id": str(uuid.uuid4()), **changes}}


def test_a_skipped_record_is_named_with_its_reason(
    backend_client: TestClient, lines: list[dict[str, Any]]
) -> None:
    """Importing into the subject that holds them: a memory of the same kind and content under
    another id is skipped as ``same_content`` (whatever else the record says: the stored
    memory is left as it was), and every record of the export as ``stored``."""
    client = backend_client
    memory = _first(lines, "memory")
    before = _export(client, SRC)
    variants = [
        _same_content(memory, status="deleted"),
        _same_content(memory, source_episode_ids=[str(uuid.uuid4())]),
        _same_content(memory, status="superseded", superseded_by=str(uuid.uuid4())),
    ]
    result = _ok(_import(client, SRC, variants))
    assert result["imported"]["memory"] == 0 and result["skipped"] == 3
    assert result["skipped_records"] == [
        {"record": i, "type": "memory", "reason": "same_content"} for i in range(3)
    ]
    assert _export(client, SRC) == before
    held = _ok(client.get(f"/v1/memories/{memory['id']}"))["memory"]
    assert held["status"] == "active" and held["content"] == memory["content"]

    again = _ok(_import(client, SRC, lines))
    assert sum(again["imported"].values()) == 0 and again["skipped"] == len(lines) - 1
    assert again["skipped_records"] == [
        {"record": i, "type": line["type"], "reason": "stored"}
        for i, line in enumerate(lines)
        if i > 0
    ]
    # Another subject's copy of the item keeps the item's id there: that is the reason told.
    item = {"type": "item", "row": _first(lines, "item")}
    answer = _ok(_import(client, DST, [item]))
    assert answer["skipped_records"] == [{"record": 0, "type": "item", "reason": "another_subject"}]


def test_an_episodes_idempotency_key_is_a_same_key_skip(backend_client: TestClient) -> None:
    client = backend_client
    _ok(client.post("/v1/episodes", json={**_episode("Hi."), "idempotency_key": "k1"}), 201)
    episode = _first(_export(client, SRC), "episode")
    twin = {"type": "episode", "row": {**episode, "id": str(uuid.uuid4())}}
    result = _ok(_import(client, SRC, [twin]))
    assert result["skipped_records"] == [{"record": 0, "type": "episode", "reason": "same_key"}]


def test_records_that_only_look_incomplete_are_taken(
    backend_client: TestClient, lines: list[dict[str, Any]]
) -> None:
    """By design: sources neither imported nor stored (expired episodes leave their memories),
    a link to a version not imported yet (a later call of a paged import brings it), and a
    tombstone that still carries text (stored without it)."""
    client = backend_client
    memory = _first(lines, "memory")
    records = [
        {"type": "memory", "row": {**memory, "source_episode_ids": [str(uuid.uuid4())]}},
        {
            "type": "memory",
            "row": {
                **memory,
                "id": str(uuid.uuid4()),
                "kind": "note",
                "status": "superseded",
                "superseded_by": str(uuid.uuid4()),
            },
        },
        {"type": "memory", "row": {**memory, "id": str(uuid.uuid4()), "kind": "procedure"}},
    ]
    records[2]["row"]["status"] = "deleted"
    result = _ok(_import(client, DST, records))
    assert result["imported"]["memory"] == 3 and result["skipped_records"] == []
    stored = {r["row"]["kind"]: r["row"] for r in _export(client, DST)}
    assert stored["note"]["status"] == "superseded" and stored["note"]["superseded_by"]
    tomb = stored["procedure"]
    assert tomb["status"] == "deleted" and tomb["content"] == "" and tomb["summary"] == ""
