"""What a compiler produces: memory drafts, before the store gives them rows and history."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from cairn.core.analysis import content_digest
from cairn.core.episodes import Episode
from cairn.core.memories import KINDS as KINDS  # (re-exported: cairn.engine.compile)
from cairn.core.memories import memory_id as memory_id


@dataclass(frozen=True)
class MemoryDraft:
    """A memory to store. ``slot`` names a single-valued fact (e.g. ``alice:employer``): a
    newer draft with the same slot and another value supersedes the stored one. A ``refresh``
    draft re-states a stored memory with newer metadata (e.g. words of later messages)."""

    kind: str
    content: str
    source_episode_ids: tuple[uuid.UUID, ...]
    valid_from: datetime
    summary: str = ""
    confidence: float = 1.0
    session_id: str | None = None
    slot: str | None = None
    # A re-emitted memory whose metadata (index context) changed: update, do not insert.
    refresh: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)

    def content_hash(self) -> str:
        """Equal only for contents that read the same (``cairn.core.analysis.hash_key``); a
        slot fact also hashes its start, so a value that comes back after another (A, B, A)
        is a new memory, not the superseded one."""
        return content_digest(self.content, self.valid_from if self.slot else None)


@dataclass(frozen=True)
class CompileInput:
    """A batch of new episodes plus, for each session they touch, all its episodes so far,
    and the names speakers stated in earlier compiles (``speaker label → name``, e.g.
    ``{"user": "Maya"}`` after "my name is Maya")."""

    episodes: Sequence[Episode]
    sessions: dict[str, list[Episode]]
    names: dict[str, str] = field(default_factory=dict)


class Compiler(Protocol):
    """Turns episodes into memory drafts. Must be deterministic for the default path."""

    name: str
    version: int

    def compile(self, batch: CompileInput) -> list[MemoryDraft]: ...
