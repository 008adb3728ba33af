"""The memory contracts of seed 001: what an agent is told, and what it hands back.

    ContextProvider.context(ContextRequest) -> ContextResult      (the read path)
    TurnSink.commit_turn(Turn) -> TurnCommit                      (a completed turn, idempotent)
    DocumentSink.put_document(Document) -> DocumentCommit          (chunked, indexed, idempotent)
    ContextRenderer.render(ContextResult) -> str                   (items to prompt text)
    Assembly = ContextProvider + TurnSink + DocumentSink           (a ``memory.Assembly``)

Implementations register under an ``impl`` name (``cairn.engine.context.impls``: by call or
the ``cairn.memory_impls`` entry-point group); Cairn's own is the built-in ``cairn``. Every
model here validates its input and says which field is wrong. No I/O lives in this module,
and nothing of the layers above it (engine, ladders) is named here.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from cairn.core.ids import UtcDateTime
from cairn.core.scope import NewScope, Scope
from cairn.core.text import check_no_nul

DEFAULT_MAX_TOKENS = 4096
DEFAULT_MAX_ITEMS = 20
# "No item limit": larger than any pack (every item costs at least one token).
NO_ITEM_LIMIT = 1_000_000
DEFAULT_RECENT_TURNS = 6
MAX_RECENT_TURNS = 200
KEY_MAX_LENGTH = 256
TURN_KEY_PREFIX = "turn:"
# The ``source`` of the episode a committed turn is stored as (its ``metadata.run_id`` names
# the ladder run that committed it, if one did).
TURN_SOURCE = "cairn.turn_sink"
TURN_KEY_MAX_LENGTH = KEY_MAX_LENGTH - len(TURN_KEY_PREFIX)

SourceClass = Literal["recent", "long_term", "summary"]
SourceType = Literal["episode", "turn", "chunk"]


class Budget(BaseModel):
    """Limits on packed context. 0 means the documented default (4,096 tokens, no character
    limit, and 20 items only when neither ``max_tokens`` nor ``max_chars`` is given); a
    negative number is rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # Strict: true or "100" is a wrong type, not 1 or 100.
    max_tokens: int = Field(default=0, strict=True)
    max_items: int = Field(default=0, strict=True)
    max_chars: int = Field(default=0, strict=True)

    @field_validator("max_tokens", "max_items", "max_chars")
    @classmethod
    def _not_negative(cls, value: int, info: Any) -> int:
        if value < 0:
            default = "no limit" if info.field_name == "max_chars" else "the default"
            raise ValueError(f"{info.field_name} must be >= 0 (0 means {default}), got {value}")
        return value

    def resolved(self) -> Budget:
        """The same budget with defaults filled in (``max_chars`` 0 stays 'no limit'). The
        item default applies only when no limit was given at all: a caller who names
        ``max_tokens`` (or ``max_chars``) gets as many items as fit in it."""
        default_items = (
            DEFAULT_MAX_ITEMS if not (self.max_tokens or self.max_chars) else NO_ITEM_LIMIT
        )
        return Budget(
            max_tokens=self.max_tokens or DEFAULT_MAX_TOKENS,
            max_items=self.max_items or default_items,
            max_chars=self.max_chars,
        )


class ContextRequest(BaseModel):
    """What to recall: a query and/or a conversation, inside one scope, under a budget."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    scope: Scope
    conversation_id: str = ""
    dataset_ids: list[str] = Field(default_factory=list)
    query: str = ""
    budget: Budget = Field(default_factory=Budget)
    min_score: float = Field(default=0.0, strict=True)
    recent_turns: int = Field(default=DEFAULT_RECENT_TURNS, ge=0, le=MAX_RECENT_TURNS, strict=True)
    recent_only: bool = Field(default=False, strict=True)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("conversation_id", "query")
    @classmethod
    def _text(cls, value: str, info: Any) -> str:
        return check_no_nul(value, info.field_name).strip()

    @field_validator("dataset_ids")
    @classmethod
    def _datasets(cls, value: list[str]) -> list[str]:
        seen: set[str] = set()
        for i, item in enumerate(value):
            if not item.strip():
                raise ValueError(f"dataset_ids[{i}] must not be empty")
            check_no_nul(item, f"dataset_ids[{i}]")
            if item in seen:
                raise ValueError(f"dataset_ids[{i}] repeats {item!r}; ids must be unique")
            seen.add(item)
        return value

    @field_validator("min_score")
    @classmethod
    def _score(cls, value: float) -> float:
        if not math.isfinite(value) or not 0.0 <= value <= 1.0:
            raise ValueError(f"min_score must be a finite number in [0, 1], got {value}")
        return value

    @model_validator(mode="after")
    def _query_or_conversation(self) -> ContextRequest:
        if not self.query and not self.conversation_id:
            raise ValueError("a query or a conversation_id is required (both are empty)")
        if self.recent_only and not self.conversation_id:
            raise ValueError("recent_only needs a conversation_id")
        return self


class SourceRef(BaseModel):
    """Where an item came from: an episode, a committed turn, or a document chunk."""

    model_config = ConfigDict(frozen=True)

    type: SourceType
    id: str
    document_id: str | None = None
    dataset_id: str | None = None


class ContextItem(BaseModel):
    """One recalled unit, scored in [0, 1] (larger is more relevant)."""

    model_config = ConfigDict(frozen=True)

    id: str
    kind: str
    content: str
    score: float = Field(ge=0.0, le=1.0)
    source_class: SourceClass
    token_count: int = Field(ge=0)
    created_at: datetime
    occurred_at: datetime | None = None
    provenance: list[SourceRef] = Field(min_length=1)
    metadata: dict[str, Any] = Field(default_factory=dict)


class ContextResult(BaseModel):
    """Packed items (their total within the budget) and whether anything was left out."""

    model_config = ConfigDict(frozen=True)

    items: list[ContextItem]
    token_count: int
    truncated: bool


class Message(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    role: str = Field(min_length=1, max_length=64)
    content: str

    @field_validator("role", "content")
    @classmethod
    def _text(cls, value: str, info: Any) -> str:
        return check_no_nul(value, info.field_name)


class Turn(BaseModel):
    """A completed conversation turn. The same ``idempotency_key`` is stored once."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    scope: NewScope
    conversation_id: str = Field(min_length=1, max_length=KEY_MAX_LENGTH)
    # The stored key carries a ``turn:`` prefix (see ``engine.turns``) in a column of
    # KEY_MAX_LENGTH, so the key itself must leave room for it.
    idempotency_key: str = Field(min_length=1, max_length=TURN_KEY_MAX_LENGTH)
    messages: list[Message] = Field(min_length=1)
    metadata: dict[str, Any] = Field(default_factory=dict)
    occurred_at: UtcDateTime | None = None

    @field_validator("conversation_id", "idempotency_key")
    @classmethod
    def _key(cls, value: str, info: Any) -> str:
        value = check_no_nul(value, info.field_name).strip()
        if not value:
            raise ValueError(f"{info.field_name} must not be empty")
        return value

    @field_validator("messages")
    @classmethod
    def _said_something(cls, value: list[Message]) -> list[Message]:
        # A turn of blank messages would be stored, and compiled, as its metadata alone.
        if not any(m.content.strip() for m in value):
            raise ValueError("every message is blank: a turn needs one with content")
        return value


class TurnCommit(BaseModel):
    """The stored turn: its episode id, and ``created`` False when the key was seen before."""

    episode_id: uuid.UUID
    conversation_id: str
    idempotency_key: str
    created: bool
    occurred_at: datetime


class Document(BaseModel):
    """A dataset document to chunk and index. ``idempotency_key`` defaults to the document id."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    scope: NewScope
    dataset_id: str = Field(min_length=1, max_length=KEY_MAX_LENGTH)
    document_id: str = Field(min_length=1, max_length=KEY_MAX_LENGTH)
    content: str = Field(min_length=1)
    title: str = ""
    idempotency_key: str = Field(default="", max_length=KEY_MAX_LENGTH)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("dataset_id", "document_id", "idempotency_key", "title", "content")
    @classmethod
    def _text(cls, value: str, info: Any) -> str:
        value = check_no_nul(value, info.field_name)
        if info.field_name in ("dataset_id", "document_id", "idempotency_key"):
            # Keys are trimmed, as a turn's are: " a" and "a" are one document.
            stripped = value.strip()
            if not stripped and (value or info.field_name != "idempotency_key"):
                raise ValueError(
                    f"{info.field_name} must not be empty"
                    + (
                        " (omit it to use document_id)"
                        if info.field_name == "idempotency_key"
                        else ""
                    )
                )
            return stripped
        if info.field_name == "content" and not value.strip():
            raise ValueError("content must not be empty")
        return value

    @property
    def key(self) -> str:
        return self.idempotency_key or self.document_id


class DocumentCommit(BaseModel):
    id: uuid.UUID
    dataset_id: str
    document_id: str
    idempotency_key: str
    chunk_count: int
    created: bool


@runtime_checkable
class ContextProvider(Protocol):
    def context(self, request: ContextRequest) -> ContextResult: ...


@runtime_checkable
class TurnSink(Protocol):
    def commit_turn(self, turn: Turn) -> TurnCommit: ...


@runtime_checkable
class DocumentSink(Protocol):
    def put_document(self, document: Document) -> DocumentCommit: ...


@runtime_checkable
class ContextRenderer(Protocol):
    def render(self, result: ContextResult) -> str: ...


@runtime_checkable
class Assembly(ContextProvider, TurnSink, DocumentSink, Protocol):
    """A ``memory.Assembly`` resource: one object that recalls, and stores turns and documents."""


class AssemblyParts:
    """An Assembly made of three separate parts (handy for applications' own impls)."""

    def __init__(self, provider: ContextProvider, turns: TurnSink, documents: DocumentSink) -> None:
        self.provider = provider
        self.turns = turns
        self.documents = documents

    def context(self, request: ContextRequest) -> ContextResult:
        return self.provider.context(request)

    def commit_turn(self, turn: Turn) -> TurnCommit:
        return self.turns.commit_turn(turn)

    def put_document(self, document: Document) -> DocumentCommit:
        return self.documents.put_document(document)


# An impl factory builds an Assembly from the host's services (for Cairn's own: ``Services``
# plus the tenant), the resource's ``deps`` and its parsed settings mapping.
AssemblyFactory = Callable[..., Assembly]
