"""Request and response bodies of the foundation endpoints (Statewave-v1-compatible shapes)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from cairn.core.construct import construct
from cairn.core.episodes import Episode
from cairn.core.ids import UtcDateTime
from cairn.core.memories import Memory
from cairn.core.subject_id import SubjectIdStr


class EpisodeCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    subject_id: SubjectIdStr
    source: str = Field(min_length=1, max_length=256)
    type: str = Field(min_length=1, max_length=128)
    payload: dict[str, Any]
    metadata: dict[str, Any] = Field(default_factory=dict)
    provenance: dict[str, Any] = Field(default_factory=dict)
    session_id: str | None = Field(None, min_length=1, max_length=256)
    idempotency_key: str | None = Field(None, min_length=1, max_length=256)
    occurred_at: UtcDateTime | None = None


class EpisodeBatchCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    episodes: list[EpisodeCreate] = Field(min_length=1, max_length=100)


class EpisodePublic(BaseModel):
    id: uuid.UUID
    subject_id: str
    source: str
    type: str
    payload: dict[str, Any]
    metadata: dict[str, Any]
    provenance: dict[str, Any]
    session_id: str | None
    idempotency_key: str | None = None
    occurred_at: AwareDatetime
    created_at: AwareDatetime

    @classmethod
    def of(cls, ep: Episode) -> EpisodePublic:
        return cls.model_construct(
            id=ep.id,
            subject_id=ep.scope.user_id,
            source=ep.source,
            type=ep.type,
            payload=ep.payload,
            metadata=ep.metadata,
            provenance=ep.provenance,
            session_id=ep.session_id,
            idempotency_key=ep.idempotency_key,
            occurred_at=ep.occurred_at,
            created_at=ep.created_at,
        )


def _iso(value: datetime) -> str:
    # Same text pydantic writes for an aware UTC datetime ("…T08:00:00Z", micros if any).
    return value.isoformat().replace("+00:00", "Z")


def episode_json(ep: Episode) -> dict[str, Any]:
    """An episode as ``EpisodePublic`` serializes it, built directly for the ingest hot path
    (constructing a pydantic model per episode cost more than the database insert)."""
    return {
        "id": str(ep.id),
        "subject_id": ep.scope.user_id,
        "source": ep.source,
        "type": ep.type,
        "payload": ep.payload,
        "metadata": ep.metadata,
        "provenance": ep.provenance,
        "session_id": ep.session_id,
        "idempotency_key": ep.idempotency_key,
        "occurred_at": _iso(ep.occurred_at),
        "created_at": _iso(ep.created_at),
    }


class EpisodeBatchPublic(BaseModel):
    episodes_created: int
    episodes: list[EpisodePublic]


class MemoryPublic(BaseModel):
    id: uuid.UUID
    subject_id: str
    kind: str
    content: str
    summary: str
    confidence: float
    valid_from: AwareDatetime | None
    valid_to: AwareDatetime | None
    status: str
    source_episode_ids: list[uuid.UUID]
    metadata: dict[str, Any]
    session_id: str | None = None
    superseded_by: uuid.UUID | None = None
    created_at: AwareDatetime
    updated_at: AwareDatetime
    score: float | None = None

    @classmethod
    def of(cls, m: Memory, score: float | None = None) -> MemoryPublic:
        """From a stored memory (valid already: built without validation, every field set)."""
        return construct(
            cls,
            {
                "id": m.id,
                "subject_id": m.scope.user_id,
                "kind": m.kind,
                "content": m.content,
                "summary": m.summary,
                "confidence": m.confidence,
                "valid_from": m.valid_from,
                "valid_to": m.valid_to,
                "status": m.status,
                "source_episode_ids": m.source_episode_ids,
                "metadata": m.metadata,
                "session_id": m.session_id,
                "superseded_by": m.superseded_by,
                "created_at": m.created_at,
                "updated_at": m.updated_at,
                "score": score,
            },
        )


class TimelinePublic(BaseModel):
    subject_id: str
    episodes: list[EpisodePublic]
    memories: list[MemoryPublic]
    episodes_has_more: bool
    memories_has_more: bool


class SubjectPublic(BaseModel):
    subject_id: str
    episode_count: int
    memory_count: int


class SubjectListPublic(BaseModel):
    subjects: list[SubjectPublic]
    total: int


class SubjectDeletedPublic(BaseModel):
    subject_id: str
    episodes_deleted: int
    memories_deleted: int
    deleted: dict[str, int] = Field(default_factory=dict, description="Rows per table.")
