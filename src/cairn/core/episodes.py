"""Episodes: append-only raw events, the input of everything Cairn remembers."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from cairn.core.scope import Scope


class NewEpisode(BaseModel):
    """An episode as the engine receives it, before it has an id."""

    model_config = ConfigDict(frozen=True)

    scope: Scope
    source: str
    type: str
    payload: dict[str, Any]
    metadata: dict[str, Any] = Field(default_factory=dict)
    provenance: dict[str, Any] = Field(default_factory=dict)
    session_id: str | None = None
    idempotency_key: str | None = None
    occurred_at: datetime | None = None


class Episode(BaseModel):
    """A stored episode."""

    id: uuid.UUID
    tenant_id: str
    scope: Scope
    source: str
    type: str
    payload: dict[str, Any]
    metadata: dict[str, Any]
    provenance: dict[str, Any]
    session_id: str | None
    idempotency_key: str | None
    occurred_at: datetime
    created_at: datetime
    seq: int = 0
