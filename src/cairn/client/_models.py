"""Typed request and response bodies of the foundation endpoints, as the SDK sees them.

Responses accept fields they do not know (``extra="allow"``) so an older SDK keeps working
against a newer server; requests forbid unknown fields so a typo fails before it is sent.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from cairn.core.subject_id import SubjectIdStr


class Response(BaseModel):
    """Base of every response model."""

    model_config = ConfigDict(extra="allow")


class Request(BaseModel):
    """Base of every request model. NaN and infinities stay numbers in its JSON dump (not
    ``null``, pydantic's default, which would lose them silently), so that the check before
    sending (``cairn.client._base.check_call``) refuses them."""

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="constants")


class EpisodeCreate(Request):
    """One episode to record (``POST /v1/episodes``)."""

    subject_id: SubjectIdStr
    source: str = Field(min_length=1, max_length=256)
    type: str = Field(min_length=1, max_length=128)
    payload: dict[str, Any]
    metadata: dict[str, Any] = Field(default_factory=dict)
    provenance: dict[str, Any] = Field(default_factory=dict)
    session_id: str | None = Field(None, min_length=1, max_length=256)
    idempotency_key: str | None = Field(None, min_length=1, max_length=256)
    occurred_at: datetime | None = None


class Episode(Response):
    id: uuid.UUID
    subject_id: str
    source: str
    type: str
    payload: dict[str, Any]
    metadata: dict[str, Any] = Field(default_factory=dict)
    provenance: dict[str, Any] = Field(default_factory=dict)
    session_id: str | None = None
    idempotency_key: str | None = None
    occurred_at: datetime
    created_at: datetime


class EpisodeBatch(Response):
    episodes_created: int
    episodes: list[Episode]


class Memory(Response):
    id: uuid.UUID
    subject_id: str
    kind: str
    content: str
    summary: str = ""
    confidence: float = 1.0
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    status: str = "active"
    source_episode_ids: list[uuid.UUID] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    session_id: str | None = None
    superseded_by: uuid.UUID | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    score: float | None = None


class Timeline(Response):
    subject_id: str
    episodes: list[Episode]
    memories: list[Memory]
    episodes_has_more: bool
    memories_has_more: bool


class Subject(Response):
    subject_id: str
    episode_count: int
    memory_count: int


class SubjectList(Response):
    subjects: list[Subject]
    total: int


class SubjectDeleted(Response):
    subject_id: str
    episodes_deleted: int
    memories_deleted: int
    deleted: dict[str, int] = Field(default_factory=dict)


class Health(Response):
    status: str


class Version(Response):
    version: str
    database: str | None = None
