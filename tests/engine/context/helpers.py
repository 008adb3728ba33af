"""Shared helpers of the context tests: turns, documents and memories written for real."""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from cairn.core.ids import uuid7
from cairn.core.memory import Document, Turn
from cairn.core.scope import Scope
from cairn.engine.context import CairnAssembly
from cairn.store import Store
from cairn.store.memory_search import search_text
from cairn.store.schema import memories

T0 = datetime(2024, 5, 7, 12, 0, tzinfo=UTC)
SCOPE = Scope(runtime_id="memories", user_id="user-1", agent_id="assistant")


def add_turn(
    a: CairnAssembly,
    text: str,
    *,
    key: str,
    scope: Scope = SCOPE,
    conversation: str = "conv-1",
    minute: int = 0,
    role: str = "user",
) -> Any:
    return a.commit_turn(
        Turn(
            scope=scope,
            conversation_id=conversation,
            idempotency_key=key,
            messages=[{"role": role, "content": text}],
            occurred_at=T0 + timedelta(minutes=minute),
        )
    )


def add_document(
    a: CairnAssembly, text: str, *, doc: str = "d1", dataset: str = "docs", scope: Scope = SCOPE
) -> Any:
    return a.put_document(Document(scope=scope, dataset_id=dataset, document_id=doc, content=text))


def add_memory(
    store: Store,
    tenant: str,
    content: str,
    *,
    kind: str = "profile_fact",
    scope: Scope = SCOPE,
    session: str | None = None,
    episode: uuid.UUID | None = None,
    minute: int = 0,
) -> uuid.UUID:
    """A compiled memory, written straight to the table (as the compiler would)."""
    mid = uuid7()
    at = T0 + timedelta(minutes=minute)
    with store.db.write() as conn:
        store.memories.bound(conn, writable=True).prepare_tenant(tenant)
        conn.execute(
            memories.insert().values(
                id=mid,
                tenant_id=tenant,
                runtime_id=scope.runtime_id,
                user_id=scope.user_id,
                agent_id=scope.agent_id,
                session_id=session,
                kind=kind,
                content=content,
                search_text=search_text(content, {}),
                summary="",
                confidence=1.0,
                valid_from=at,
                valid_to=None,
                status="active",
                source_episode_ids=[str(episode or uuid7())],
                metadata={},
                content_hash=hashlib.sha256(content.encode()).hexdigest(),
                superseded_by=None,
                created_at=at,
                updated_at=at,
            )
        )
    return mid
