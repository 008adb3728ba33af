"""A memory row as ``MemoryRepository.insert_new`` takes it, for store tests that need rows
without a compile."""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime
from typing import Any

from cairn.core.scope import Scope
from cairn.store.memory_search import search_text

NOW = datetime(2024, 5, 1, tzinfo=UTC)


def memory_row(scope: Scope, content: str, **fields: Any) -> dict[str, Any]:
    """An active turn of tenant ``acme``'s ``scope`` saying ``content`` (indexed as the compiler
    indexes it); ``fields`` replace any column's value."""
    row: dict[str, Any] = {
        "id": uuid.uuid4(),
        "tenant_id": "acme",
        "runtime_id": scope.runtime_id,
        "user_id": scope.user_id,
        "agent_id": scope.agent_id,
        "session_id": "s",
        "kind": "turn",
        "content": content,
        "search_text": search_text(content, {}),
        "summary": content,
        "confidence": 1.0,
        "valid_from": NOW,
        "valid_to": None,
        "status": "active",
        "source_episode_ids": [],
        "metadata": {},
        "content_hash": hashlib.sha256(f"{scope.user_id}{content}".encode()).hexdigest(),
        "superseded_by": None,
        "created_at": NOW,
        "updated_at": NOW,
    }
    return {**row, **fields}
