"""Single items, erasure and export: the calls and answers behind ``memories.get/update/
delete``, ``episodes.get/delete``, ``scopes.delete``, ``subjects.export/import_records`` and
``remember``."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from typing import Any, TypeVar

from pydantic import Field, model_validator

from cairn.client._base import Call, clean_params, iso, path_segment
from cairn.client._feature_models import CompileResult
from cairn.client._models import Episode, EpisodeCreate, Memory, Request, Response

IMPORT_BATCH = 500  # records per import call (well under the server's 1000 a call)
IMPORT_BATCH_BYTES = 512 * 1024  # and their JSON, under the server's usual body limit
T = TypeVar("T")


class Scoped(Response):
    scope: dict[str, str] = Field(default_factory=dict)


class MemoryItem(Memory, Scoped):
    """A memory with its full scope."""


class EpisodeItem(Episode, Scoped):
    """An episode with its full scope."""


class MemoryDetail(Response):
    memory: MemoryItem
    replaces: list[MemoryItem] = Field(default_factory=list)
    replaced_by: list[MemoryItem] = Field(default_factory=list)
    current_id: uuid.UUID


class MemoryDeleted(Response):
    memory_id: uuid.UUID
    deleted: bool


class EpisodeDeleted(Response):
    episode_id: uuid.UUID
    memories_deleted: int


class ScopesDeleted(Response):
    user_id: str
    runtime_id: str | None = None
    agent_id: str | None = None
    partitions: list[dict[str, str]] = Field(default_factory=list)
    deleted: dict[str, int] = Field(default_factory=dict)


class SkippedRecord(Response):
    """A record an import skipped: its place among the records given (a header counts),
    its type, and why (``stored``, ``same_key``, ``same_content``, ``another_subject``)."""

    record: int
    type: str
    reason: str


class ImportResult(Response):
    subject_id: str
    imported: dict[str, int] = Field(default_factory=dict)
    skipped: int = 0
    skipped_records: list[SkippedRecord] = Field(default_factory=list)


def get_memory_call(memory_id: uuid.UUID | str) -> Call[MemoryDetail]:
    return Call("GET", f"/v1/memories/{path_segment(str(memory_id))}", MemoryDetail)


class Unset:
    """The default of an argument whose ``None`` means something (``valid_to=None`` clears
    the end of a memory's validity): not given at all."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET = Unset()


class TurnMessage(Request):
    """A message of ``remember``, as a ``conversation.turn`` episode carries it (docs:
    memories.md, "turn"): text as ``content`` (a string or OpenAI-style parts) or ``text``,
    and the optional fields the compiler reads; any other key is a typo."""

    role: str = "user"
    content: str | list[dict[str, Any]] | None = None
    text: str | None = None
    name: str | None = None
    speaker: str | None = None
    caption: str | None = None
    image_caption: str | None = None
    timestamp: str | datetime | None = None

    @model_validator(mode="after")
    def _said_something(self) -> TurnMessage:
        if self.content is None and self.text is None:
            raise ValueError("a message needs 'content' (or 'text')")
        return self


def update_memory_call(
    memory_id: uuid.UUID | str,
    *,
    content: str | None,
    kind: str | None,
    confidence: float | None,
    valid_from: datetime | str | None,
    valid_to: datetime | str | Unset | None,
    editor: str | None,
    note: str | None,
) -> Call[MemoryItem]:
    body = {
        "content": content,
        "kind": kind,
        "confidence": confidence,
        "valid_from": iso(valid_from),
        "editor": editor,
        "note": note,
    }
    given = {k: v for k, v in body.items() if v is not None}
    if not isinstance(valid_to, Unset):  # None here clears the end of validity
        given["valid_to"] = iso(valid_to)
    # Not retried: a repeat after a lost answer is a 409 naming the version the first made.
    return Call(
        "PATCH",
        f"/v1/memories/{path_segment(str(memory_id))}",
        MemoryItem,
        json=given,
        idempotent=False,
    )


def delete_memory_call(memory_id: uuid.UUID | str) -> Call[MemoryDeleted]:
    return Call("DELETE", f"/v1/memories/{path_segment(str(memory_id))}", MemoryDeleted)


def get_episode_call(episode_id: uuid.UUID | str) -> Call[EpisodeItem]:
    return Call("GET", f"/v1/episodes/{path_segment(str(episode_id))}", EpisodeItem)


def delete_episode_call(episode_id: uuid.UUID | str) -> Call[EpisodeDeleted]:
    return Call("DELETE", f"/v1/episodes/{path_segment(str(episode_id))}", EpisodeDeleted)


def delete_scopes_call(
    user_id: str, runtime_id: str | None, agent_id: str | None
) -> Call[ScopesDeleted]:
    params = clean_params({"user_id": user_id, "runtime_id": runtime_id, "agent_id": agent_id})
    return Call("DELETE", "/v1/scopes", ScopesDeleted, params=params)


def export_call(subject_id: str) -> Call[Any]:
    return Call("GET", f"/v1/subjects/{path_segment(subject_id)}/export", Any)


def parse_lines(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    for line in lines:
        if line.strip():
            yield json.loads(line)


def import_calls(
    subject_id: str, records: Iterable[dict[str, Any]], places: list[list[int]] | None = None
) -> Iterator[Call[ImportResult]]:
    """One call per batch of records (each batch idempotent: stored rows are skipped);
    ``places`` receives, as each call is made, the places its records had in ``records``."""
    path = f"/v1/subjects/{path_segment(subject_id)}/import"
    numbered = ((p, r) for p, r in enumerate(records) if r.get("type") != "header")
    for batch in import_batches(numbered, lambda pair: pair[1]):
        if places is not None:
            places.append([p for p, _ in batch])
        body = {"records": [r for _, r in batch]}
        yield Call("POST", path, ImportResult, json=body, idempotent=True)


def import_batches(items: Iterable[T], record: Callable[[T], dict[str, Any]]) -> Iterator[list[T]]:
    """``items`` in batches of at most ``IMPORT_BATCH`` records and ``IMPORT_BATCH_BYTES`` of
    JSON (``record(item)`` is an item's record); a record longer than that is a batch of its
    own (the server takes an import body several times its usual limit)."""
    batch: list[T] = []
    size = 0
    for item in items:
        length = len(json.dumps(record(item), ensure_ascii=False).encode()) + 1
        if batch and (len(batch) == IMPORT_BATCH or size + length > IMPORT_BATCH_BYTES):
            yield batch
            batch, size = [], 0
        batch.append(item)
        size += length
    if batch:
        yield batch


def merge_imports(
    subject_id: str, results: Iterable[ImportResult], places: list[list[int]] | None = None
) -> ImportResult:
    """The batches' results as one; with ``places`` (from ``import_calls``), each skipped
    record named by its place among all the records given."""
    imported: dict[str, int] = {}
    skipped: list[SkippedRecord] = []
    count = 0
    for i, r in enumerate(results):
        count += r.skipped  # (a server before skipped_records sends the count alone)
        at = places[i] if places is not None else None
        for s in r.skipped_records:
            skipped.append(s if at is None else s.model_copy(update={"record": at[s.record]}))
        for k, v in r.imported.items():
            imported[k] = imported.get(k, 0) + v
    return ImportResult(
        subject_id=subject_id, imported=imported, skipped=count, skipped_records=skipped
    )


def merge_compiles(subject_id: str, results: list[CompileResult]) -> CompileResult:
    memories = [m for r in results for m in r.memories]
    last = results[-1]
    return CompileResult(
        subject_id=subject_id,
        memories_created=sum(r.memories_created for r in results),
        memories=memories,
        has_more=last.has_more,
        remaining_episodes=last.remaining_episodes,
    )


def turn_episodes(
    subject_id: str, messages: Iterable[dict[str, Any] | str], session_id: str | None
) -> list[EpisodeCreate]:
    """One ``conversation.turn`` episode per message (a bare string is a user message); a
    message is checked before anything is sent (``TurnMessage``: a misspelt key is an error,
    not a message that says nothing)."""
    out = []
    for m in messages:
        raw = {"role": "user", "content": m} if isinstance(m, str) else m
        message = TurnMessage.model_validate(raw).model_dump(mode="json", exclude_none=True)
        out.append(
            EpisodeCreate(
                subject_id=subject_id,
                source="sdk",
                type="conversation.turn",
                payload={"messages": [message]},
                session_id=session_id,
            )
        )
    return out
