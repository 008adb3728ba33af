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
SUMMARY_CHARS = 200  # a memory's summary, its short form, is at most this long

_NAMESPACE = uuid.UUID("6f0c6d2e-6a34-5c61-9b8e-63616972e000")
# Ids of imported memories that could not keep theirs (``moved_memory_id``).
_MOVED = uuid.UUID("5b0b7c52-3f0e-5d2a-8f7e-63616972e001")


def validity_problem(valid_from: datetime | None, valid_to: datetime | None) -> str | None:
    """Why a memory's validity cannot be, or None: it may not end before it starts."""
    if valid_from is not None and valid_to is not None and valid_to < valid_from:
        return "valid_to is before valid_from"
    return None


def memory_id(tenant_id: str, scope: Scope, kind: str, content_hash: str) -> uuid.UUID:
    """Deterministic id: the same memory compiled twice, anywhere, gets the same id."""
    key = "\x1f".join(
        (tenant_id, scope.runtime_id, scope.user_id, scope.agent_id, kind, content_hash)
    )
    return uuid.uuid5(_NAMESPACE, key)


def moved_memory_id(tenant_id: str, scope: Scope, old_id: uuid.UUID, attempt: int = 0) -> uuid.UUID:
    """The id a memory gets in ``scope`` of ``tenant_id`` when its own id is not this
    partition's to use: an imported memory whose id was derived for another tenant or subject,
    or (``attempt`` > 0) a compiled one whose id some other partition already holds. A function
    of the partition and the old id alone, so every reference to the old id maps alike."""
    key = "\x1f".join(
        (tenant_id, scope.runtime_id, scope.user_id, scope.agent_id, str(old_id), str(attempt))
    )
    return uuid.uuid5(_MOVED, key)


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
