"""Rows of ``memories`` as ``Memory`` objects, and the key that makes a memory unique."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from sqlalchemy import Row

from cairn.core.construct import construct
from cairn.core.memories import Memory
from cairn.core.scope import Scope


def memory_of(m: Mapping[Any, Any], seq: int) -> Memory:
    """The one row mapper of ``memories``: a stored row's mapping, or a row just inserted
    (with the ``seq`` its insert returned)."""
    scope = {"runtime_id": m["runtime_id"], "user_id": m["user_id"], "agent_id": m["agent_id"]}
    return construct(
        Memory,
        {
            "id": m["id"],
            "tenant_id": m["tenant_id"],
            "scope": construct(Scope, scope),
            "kind": m["kind"],
            "content": m["content"],
            "summary": m["summary"],
            "confidence": m["confidence"],
            "valid_from": m["valid_from"],
            "valid_to": m["valid_to"],
            "status": m["status"],
            "source_episode_ids": [uuid.UUID(str(x)) for x in m["source_episode_ids"]],
            "metadata": m["metadata"],
            "session_id": m["session_id"],
            "superseded_by": m["superseded_by"],
            "created_at": m["created_at"],
            "updated_at": m["updated_at"],
            "seq": seq,
        },
    )


def row_to_memory(row: Row[Any]) -> Memory:
    return memory_of(row._mapping, row._mapping["seq"])


def content_key(row: dict[str, Any]) -> tuple[Any, ...]:
    """The unique ``(tenant, scope, kind, content_hash)`` key of a memory row."""
    return (
        row["tenant_id"],
        row["runtime_id"],
        row["user_id"],
        row["agent_id"],
        row["kind"],
        row["content_hash"],
    )
