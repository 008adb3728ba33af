"""Context: ``client.context`` (Statewave style) and ``client.scopes`` (the memory contracts:
context, turns, documents, addressed by a scope)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from cairn.client._base import Call, body_of, clean_params, iso
from cairn.client._feature_models import (
    Budget,
    ContextBundle,
    DocumentCommit,
    DocumentDeleted,
    Message,
    ScopeContext,
    ScopeLike,
    TurnCommit,
    scope_of,
)
from cairn.client._lifecycle import ScopesDeleted, delete_scopes_call

if TYPE_CHECKING:
    from cairn.client._client import AsyncCairn, Cairn

MessageLike = Message | dict[str, str]


def context_call(
    subject_id: str, task: str, max_tokens: int | None, session_id: str | None
) -> Call[ContextBundle]:
    body: dict[str, Any] = {"subject_id": subject_id, "task": task}
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    if session_id is not None:
        body["session_id"] = session_id
    # Assembling context only reads, so repeating it is safe.
    return Call("POST", "/v1/context", ContextBundle, json=body, idempotent=True)


def _scope(scope: ScopeLike) -> dict[str, Any]:
    return body_of(scope_of(scope))


def scope_context_call(
    scope: ScopeLike,
    query: str,
    conversation_id: str | None,
    dataset_ids: list[str] | None,
    budget: Budget | dict[str, int] | None,
    min_score: float | None,
    recent_turns: int | None,
    recent_only: bool | None,
    render: bool | str | dict[str, Any] | None,
    max_chars: int | None,
) -> Call[ScopeContext]:
    body: dict[str, Any] = {"scope": _scope(scope), "query": query}
    optional = {
        "conversation_id": conversation_id,
        "dataset_ids": dataset_ids,
        "min_score": min_score,
        "recent_turns": recent_turns,
        "recent_only": recent_only,
    }
    body.update({k: v for k, v in optional.items() if v is not None})
    if budget is not None:
        body["budget"] = body_of(
            budget if isinstance(budget, Budget) else Budget.model_validate(budget)
        )
    if isinstance(render, dict):  # the HTTP body's own shape: {"template"?, "max_chars"?}
        unknown = set(render) - {"template", "max_chars"}
        if unknown:
            raise TypeError(f"render takes template and max_chars, not {sorted(unknown)}")
        if max_chars and "max_chars" in render:
            raise TypeError("give max_chars once: in render or as max_chars=, not both")
        body["render"] = {"max_chars": max_chars or 0, **render}
    elif render:
        body["render"] = {"max_chars": max_chars or 0}
        if isinstance(render, str):
            body["render"]["template"] = render
    return Call("POST", "/v1/scopes/context", ScopeContext, json=body, idempotent=True)


def turn_call(
    scope: ScopeLike,
    conversation_id: str,
    idempotency_key: str,
    messages: list[MessageLike],
    metadata: dict[str, Any] | None,
    occurred_at: datetime | str | None,
) -> Call[TurnCommit]:
    body: dict[str, Any] = {
        "scope": _scope(scope),
        "conversation_id": conversation_id,
        "idempotency_key": idempotency_key,
        "messages": [
            body_of(m if isinstance(m, Message) else Message.model_validate(m)) for m in messages
        ],
        "metadata": metadata or {},
    }
    if occurred_at is not None:
        body["occurred_at"] = iso(occurred_at)
    # Turns are idempotent per key (run id): a retry returns the original commit.
    return Call("POST", "/v1/scopes/turns", TurnCommit, json=body, idempotent=True)


def document_call(
    scope: ScopeLike,
    dataset_id: str,
    document_id: str,
    content: str,
    title: str,
    idempotency_key: str | None,
    metadata: dict[str, Any] | None,
) -> Call[DocumentCommit]:
    body: dict[str, Any] = {
        "scope": _scope(scope),
        "dataset_id": dataset_id,
        "document_id": document_id,
        "content": content,
        "title": title,
        "metadata": metadata or {},
    }
    if idempotency_key:
        body["idempotency_key"] = idempotency_key
    return Call(
        "POST", "/v1/scopes/documents", DocumentCommit, json=body, idempotent=bool(idempotency_key)
    )


def delete_document_call(
    scope: ScopeLike, dataset_id: str, document_id: str
) -> Call[DocumentDeleted]:
    params = clean_params({**_scope(scope), "dataset_id": dataset_id, "document_id": document_id})
    return Call("DELETE", "/v1/scopes/documents", DocumentDeleted, params=params)


class Scopes:
    """``client.scopes``: context, turns and documents addressed by a scope."""

    def __init__(self, client: Cairn) -> None:
        self._client = client

    def delete(
        self, user_id: str, *, runtime_id: str | None = None, agent_id: str | None = None
    ) -> ScopesDeleted:
        """Erase a person: everything of ``user_id`` in every runtime and agent (or in one)."""
        return self._client._send(delete_scopes_call(user_id, runtime_id, agent_id))

    def context(
        self,
        scope: ScopeLike,
        query: str = "",
        *,
        conversation_id: str | None = None,
        dataset_ids: list[str] | None = None,
        budget: Budget | dict[str, int] | None = None,
        min_score: float | None = None,
        recent_turns: int | None = None,
        recent_only: bool | None = None,
        render: bool | str | dict[str, Any] | None = None,
        max_chars: int | None = None,
    ) -> ScopeContext:
        """Packed context items for one scope. ``render=True`` adds the default rendering,
        a string renders with that (Jinja2) template; a dict is the API's ``render``
        (``template``, ``max_chars``)."""
        return self._client._send(
            scope_context_call(
                scope,
                query,
                conversation_id,
                dataset_ids,
                budget,
                min_score,
                recent_turns,
                recent_only,
                render,
                max_chars,
            )
        )

    def commit_turn(
        self,
        scope: ScopeLike,
        conversation_id: str,
        idempotency_key: str,
        messages: list[MessageLike],
        *,
        metadata: dict[str, Any] | None = None,
        occurred_at: datetime | str | None = None,
    ) -> TurnCommit:
        """Store one conversation turn; a repeated key returns the original commit."""
        return self._client._send(
            turn_call(scope, conversation_id, idempotency_key, messages, metadata, occurred_at)
        )

    def put_document(
        self,
        scope: ScopeLike,
        dataset_id: str,
        document_id: str,
        content: str,
        *,
        title: str = "",
        idempotency_key: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> DocumentCommit:
        """Store (chunk and index) a document of a dataset."""
        return self._client._send(
            document_call(scope, dataset_id, document_id, content, title, idempotency_key, metadata)
        )

    def delete_document(
        self, scope: ScopeLike, dataset_id: str, document_id: str
    ) -> DocumentDeleted:
        """Delete a document (every version stored of it) with its chunks."""
        return self._client._send(delete_document_call(scope, dataset_id, document_id))


class AsyncScopes:
    """``client.scopes`` of ``AsyncCairn``."""

    def __init__(self, client: AsyncCairn) -> None:
        self._client = client

    async def delete(
        self, user_id: str, *, runtime_id: str | None = None, agent_id: str | None = None
    ) -> ScopesDeleted:
        """Erase a person: everything of ``user_id`` in every runtime and agent (or in one)."""
        return await self._client._send(delete_scopes_call(user_id, runtime_id, agent_id))

    async def context(
        self,
        scope: ScopeLike,
        query: str = "",
        *,
        conversation_id: str | None = None,
        dataset_ids: list[str] | None = None,
        budget: Budget | dict[str, int] | None = None,
        min_score: float | None = None,
        recent_turns: int | None = None,
        recent_only: bool | None = None,
        render: bool | str | dict[str, Any] | None = None,
        max_chars: int | None = None,
    ) -> ScopeContext:
        """Packed context items for one scope (see ``Scopes.context``)."""
        return await self._client._send(
            scope_context_call(
                scope,
                query,
                conversation_id,
                dataset_ids,
                budget,
                min_score,
                recent_turns,
                recent_only,
                render,
                max_chars,
            )
        )

    async def commit_turn(
        self,
        scope: ScopeLike,
        conversation_id: str,
        idempotency_key: str,
        messages: list[MessageLike],
        *,
        metadata: dict[str, Any] | None = None,
        occurred_at: datetime | str | None = None,
    ) -> TurnCommit:
        """Store one conversation turn; a repeated key returns the original commit."""
        return await self._client._send(
            turn_call(scope, conversation_id, idempotency_key, messages, metadata, occurred_at)
        )

    async def put_document(
        self,
        scope: ScopeLike,
        dataset_id: str,
        document_id: str,
        content: str,
        *,
        title: str = "",
        idempotency_key: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> DocumentCommit:
        """Store (chunk and index) a document of a dataset."""
        return await self._client._send(
            document_call(scope, dataset_id, document_id, content, title, idempotency_key, metadata)
        )

    async def delete_document(
        self, scope: ScopeLike, dataset_id: str, document_id: str
    ) -> DocumentDeleted:
        """Delete a document (every version stored of it) with its chunks."""
        return await self._client._send(delete_document_call(scope, dataset_id, document_id))
