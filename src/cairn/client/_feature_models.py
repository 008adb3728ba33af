"""Typed bodies of the feature endpoints: templates, context, scopes, slates, ladders, runs.

Shapes follow the server's route modules (``cairn.api.routes.*``) and ``/openapi.json``.
Responses allow unknown fields, so a newer server never breaks an older SDK.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pydantic import Field

from cairn.client._models import Episode, Memory, Request, Response
from cairn.core.scope import Scope as CoreScope


# --- memory templates (/v1/memory-templates) -------------------------------------------------
class TemplateField(Response):
    name: str
    type: str = "string"
    required: bool = False
    description: str | None = None


class MemoryTemplate(Response):
    id: str
    version: int
    title: str
    description: str | None = None
    episode_type: str
    fields: list[TemplateField]
    content_template: str


class MemoryTemplateList(Response):
    templates: list[MemoryTemplate]


# --- context (/v1/context and /v1/scopes/*) --------------------------------------------------
class ContextBundle(Response):
    """The Statewave-compatible answer of ``POST /v1/context``."""

    subject_id: str
    task: str
    facts: list[Memory]
    procedures: list[Memory]
    episodes: list[Episode]
    provenance: dict[str, Any]
    assembled_context: str
    token_estimate: int


class Scope(Request):
    """The hard partition of memory: ``runtime_id`` + ``user_id`` + ``agent_id``."""

    runtime_id: str = Field(min_length=1)
    user_id: str = ""
    agent_id: str = ""


# A scope as the SDK takes it: its own ``Scope``, the contracts' (``cairn.core.scope.Scope``,
# seed 001), or a dict of the same keys.
ScopeLike = Scope | CoreScope | dict[str, str]


def scope_of(scope: ScopeLike) -> Scope:
    """``scope`` as the SDK's ``Scope`` (validated)."""
    if isinstance(scope, Scope):
        return scope
    if isinstance(scope, CoreScope):
        return Scope.model_validate(scope.model_dump())
    return Scope.model_validate(scope)


class Budget(Request):
    max_tokens: int = 0
    max_items: int = 0
    max_chars: int = 0


class SourceRef(Response):
    type: str
    id: str
    document_id: str | None = None
    dataset_id: str | None = None


class ContextItem(Response):
    id: str
    kind: str
    content: str
    score: float
    source_class: str
    token_count: int
    created_at: datetime
    occurred_at: datetime | None = None
    provenance: list[SourceRef]
    metadata: dict[str, Any] = Field(default_factory=dict)


class ScopeContext(Response):
    """``ContextProvider.context``: packed items, and ``rendered`` text when asked for."""

    items: list[ContextItem]
    token_count: int
    truncated: bool
    rendered: str | None = None


class Message(Request):
    role: str
    content: str


class TurnCommit(Response):
    episode_id: uuid.UUID
    conversation_id: str
    idempotency_key: str
    created: bool
    occurred_at: datetime


class DocumentCommit(Response):
    id: uuid.UUID
    dataset_id: str
    document_id: str
    idempotency_key: str
    chunk_count: int
    created: bool


class DocumentDeleted(Response):
    scope: Scope
    dataset_id: str
    document_id: str
    documents_deleted: int
    chunks_deleted: int


# --- slates (/v1/slates) ----------------------------------------------------------------------
class SlateInstance(Response):
    ladder: str
    slate: str
    partition: str
    user_id: str | None = None
    folders: int
    tokens: int
    tokenLimit: int


class SlateList(Response):
    slates: list[SlateInstance]


class Eviction(Response):
    id: Any = None
    ladder: str
    slate: str
    folder: str
    file: str
    user_id: str | None = None
    preview: str = ""
    tokens: int = 0
    policy: str = ""
    evicted_at: datetime | None = None
    run_id: str | None = None


class SlateWriteResult(Response):
    """``written`` is False (with ``reason``) when a ``match``/``field`` write did not apply."""

    written: bool
    slate: str | None = None
    folder: str | None = None
    file: str | None = None
    usage: dict[str, int] | None = None
    file_tokens: int | None = None
    entries_written: int | None = None
    entries_replaced: int | None = None
    evictions: list[Eviction] = Field(default_factory=list)
    reason: str | None = None
    detail: Any = None


class EvictionList(Response):
    ladder: str
    slate: str
    evictions: list[Eviction]


# --- ladders and runs (/v1/local, /v1/runs) ----------------------------------------------------
class ChatChoice(Response):
    index: int = 0
    message: dict[str, Any] = Field(default_factory=dict)
    finish_reason: str | None = None


class ChatCompletion(Response):
    """An OpenAI-compatible chat completion; ``text`` is the first choice's content."""

    id: str
    object: str = "chat.completion"
    created: int = 0
    model: str = ""
    choices: list[ChatChoice]
    usage: dict[str, Any] | None = None

    @property
    def text(self) -> str:
        if not self.choices:
            return ""
        content = self.choices[0].message.get("content")
        return content if isinstance(content, str) else ""


class ChatChunk(Response):
    """One streamed delta of a chat completion; ``text`` is the first choice's new content."""

    id: str
    object: str = "chat.completion.chunk"
    created: int = 0
    model: str = ""
    choices: list[dict[str, Any]] = Field(default_factory=list)
    usage: dict[str, Any] | None = None

    @property
    def text(self) -> str:
        if not self.choices:
            return ""
        content = (self.choices[0].get("delta") or {}).get("content")
        return content if isinstance(content, str) else ""


class Model(Response):
    id: str
    object: str = "model"
    created: int = 0
    owned_by: str = ""
    description: str | None = None


class ModelList(Response):
    object: str = "list"
    data: list[Model]


class Run(Response):
    id: str
    ladder: str
    status: str
    model: str | None = None
    user: str | None = None
    created_at: datetime
    finished_at: datetime | None = None
    duration_ms: float | None = None
    error: Any = None
    # Only in ``runs.get``:
    effects: Any = None
    trace: Any = None
    response: Any = None


class RunList(Response):
    runs: list[Run]
    total: int


# --- memories (/v1/memories) -------------------------------------------------------------------
class CompileResult(Response):
    """What one synchronous compile produced (a batch: see ``has_more``)."""

    subject_id: str
    memories_created: int
    memories: list[Memory]
    has_more: bool = False
    remaining_episodes: int = 0


class CompileJobQueued(Response):
    job_id: uuid.UUID
    status: str


class CompileJob(Response):
    job_id: uuid.UUID
    status: str
    subject_id: str
    memories_created: int = 0
    memories: list[Memory] = Field(default_factory=list)
    error: str | None = None

    @property
    def finished(self) -> bool:
        return self.status not in ("queued", "pending", "running")


class SearchResult(Response):
    memories: list[Memory]
