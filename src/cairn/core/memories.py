"""Memories: compiled, provenance-tagged units derived from episodes."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from cairn.core.scope import Scope

# Kinds a compiler makes. ``turn``: one conversation message; ``note``: a text episode or a
# chunk of one; ``profile_fact``: a fact about a speaker; ``episode_summary``: an extractive
# summary of one session; ``procedure``: how-to knowledge (the LLM compiler).
KINDS = ("turn", "note", "profile_fact", "episode_summary", "procedure")

MemoryStatus = Literal["active", "superseded", "deleted"]


class Memory(BaseModel):
    """A stored memory. ``source_episode_ids`` is never empty."""

    id: uuid.UUID
    tenant_id: str
    scope: Scope
    kind: str
    content: str
    summary: str
    confidence: float = Field(ge=0.0, le=1.0)
    valid_from: datetime | None
    valid_to: datetime | None
    status: MemoryStatus
    source_episode_ids: list[uuid.UUID]
    metadata: dict[str, Any]
    session_id: str | None = None
    superseded_by: uuid.UUID | None = None
    created_at: datetime
    updated_at: datetime
    seq: int = 0
