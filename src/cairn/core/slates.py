"""Slate state as plain objects (no I/O): entries, files, folders, and what a write returns.

A file holds entries. A *text* file reads as its entries joined by a newline; a *json* file
(made by ``mergeByKey``) reads as a JSON array whose items are its entries. A file without
entries reads as the empty string, whatever its kind. Each folder keeps a logical ``clock``:
every write and every counted read advances it, so ``seq`` (when an entry was written) and
``last_used`` (when a file was last read or written) are exact orders with no ties.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from cairn.core.analysis import cut_text

FileKind = Literal["text", "json"]
PREVIEW_CHARS = 200


@dataclass(slots=True)
class Entry:
    """One written unit of a file. ``position`` orders entries inside the file; ``seq`` is the
    moment it was written (an item updated by ``mergeByKey`` keeps its position, gets a new seq)."""

    file: str
    seq: int
    position: int
    content: str
    tokens: int
    written_at: datetime | None = None  # set on new entries (not loaded back: not needed)
    run_id: str | None = None
    id: int | None = None


@dataclass(slots=True)
class FileState:
    name: str
    kind: FileKind = "text"
    entries: list[Entry] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    last_used: int = 0
    ordinal: int = 0
    tokens: int = 0
    id: int | None = None

    @property
    def text(self) -> str:
        return render(self.kind, self.entries)


@dataclass(slots=True)
class FolderState:
    """A folder as loaded (and, in a write transaction, locked) from the store."""

    slate: str
    name: str
    token_limit: int
    policy: str
    clock: int = 0
    files: dict[str, FileState] = field(default_factory=dict)
    id: int | None = None

    @property
    def usage(self) -> int:
        return sum(f.tokens for f in self.files.values())


def render(kind: FileKind, entries: list[Entry]) -> str:
    """The text of a file with these entries (in position order)."""
    if not entries:
        return ""
    ordered = sorted(entries, key=lambda e: e.position)
    if kind == "json":
        return "[" + ", ".join(e.content for e in ordered) + "]"
    return "\n".join(e.content for e in ordered)


def canonical_json(value: Any) -> str:
    """How JSON values are stored and written: on one line with ``json.dumps``'s separators
    (``{"a": 1}``), Unicode kept."""
    return json.dumps(value, ensure_ascii=False)


def preview(text: str) -> str:
    return text if len(text) <= PREVIEW_CHARS else cut_text(text, PREVIEW_CHARS - 1) + "…"


@dataclass(frozen=True, slots=True)
class Eviction:
    """An entry removed to make room (or by ``evict``), as recorded and listed."""

    slate: str
    folder: str
    file: str
    preview: str
    tokens: int
    policy: str
    evicted_at: datetime
    run_id: str | None = None
    ladder: str = ""
    user_id: str = ""
    id: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "ladder": self.ladder,
            "slate": self.slate,
            "folder": self.folder,
            "file": self.file,
            "user_id": self.user_id or None,
            "preview": self.preview,
            "tokens": self.tokens,
            "policy": self.policy,
            "evicted_at": self.evicted_at.isoformat().replace("+00:00", "Z"),
            "run_id": self.run_id,
        }


@dataclass(frozen=True, slots=True)
class WriteResult:
    """A committed write: the folder's usage after it, the file's tokens, and any evictions."""

    slate: str
    folder: str
    file: str
    usage: int
    token_limit: int
    file_tokens: int
    entries_written: int
    entries_replaced: int
    evictions: list[Eviction]

    def to_dict(self) -> dict[str, Any]:
        return {
            "written": True,
            "slate": self.slate,
            "folder": self.folder,
            "file": self.file,
            "usage": {"tokens": self.usage, "tokenLimit": self.token_limit},
            "file_tokens": self.file_tokens,
            "entries_written": self.entries_written,
            "entries_replaced": self.entries_replaced,
            "evictions": [e.to_dict() for e in self.evictions],
        }


@dataclass(frozen=True, slots=True)
class WriteOutcome:
    """What a ``slateWrite`` or gated write did: a write, or a no-op with its reason."""

    written: bool
    result: WriteResult | None = None
    reason: str | None = None
    detail: str | None = None
    value: str | None = None

    def to_dict(self) -> dict[str, Any]:
        if self.result is not None:
            return self.result.to_dict()
        return {"written": False, "reason": self.reason, "detail": self.detail}


@dataclass(frozen=True, slots=True)
class FolderKey:
    """Where a folder's state lives: tenant + ladder (+ user for ``partition: user``)."""

    tenant: str
    ladder: str
    user_id: str
    slate: str
    folder: str
