"""A subject's timeline: its episodes and memories in time order, each paged by limit/offset,
read in one snapshot. The one query behind ``GET /v1/timeline`` and the inspector's subject
page, so the two can never disagree."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from cairn.core.episodes import Episode
from cairn.core.memories import Memory
from cairn.core.scope import Scope

if TYPE_CHECKING:
    from cairn.store import Store

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class TimelinePage:
    """One page of each list, whether more rows exist past it, and (when asked for) the
    partition's memory kinds, sessions and totals."""

    episodes: list[Episode]
    memories: list[Memory]
    episodes_has_more: bool
    memories_has_more: bool
    kinds: list[str] = field(default_factory=list)
    sessions: list[str] = field(default_factory=list)
    total_episodes: int = 0
    total_memories: int = 0


def read_timeline(
    store: Store,
    tenant_id: str,
    scope: Scope,
    *,
    limit: int,
    offset: int = 0,
    newest_first: bool = False,
    kind: str | None = None,
    session_id: str | None = None,
    facets: bool = False,
) -> TimelinePage:
    """The timeline page of ``scope``. With ``newest_first`` the window is taken from the
    newest end (``offset`` counts back); rows inside a page are always oldest first. ``kind``
    filters memories, ``session_id`` both lists; ``facets`` adds kinds, sessions and totals."""
    kinds: list[str] = []
    sessions: list[str] = []
    total_episodes = total_memories = 0
    with store.snapshot() as tx:
        # One row past the page tells whether more exist.
        episodes = tx.episodes.list(
            tenant_id,
            scope,
            limit=limit + 1,
            offset=offset,
            newest_first=newest_first,
            session_id=session_id,
        )
        memories = tx.memories.list(
            tenant_id,
            scope,
            limit=limit + 1,
            offset=offset,
            newest_first=newest_first,
            kind=kind,
            session_id=session_id,
        )
        if facets:
            kinds, sessions = tx.memories.facets(tenant_id, scope)
            total_episodes = tx.episodes.count(tenant_id, scope)
            total_memories = tx.memories.count(tenant_id, scope)
    episodes, episodes_more = _window(episodes, limit, newest_first)
    memories, memories_more = _window(memories, limit, newest_first)
    return TimelinePage(
        episodes,
        memories,
        episodes_more,
        memories_more,
        kinds,
        sessions,
        total_episodes,
        total_memories,
    )


def _window(rows: list[T], limit: int, newest_first: bool) -> tuple[list[T], bool]:
    """Cut the one extra row fetched to tell whether more exist (the oldest one when paging
    from the newest end)."""
    return (rows[-limit:] if newest_first else rows[:limit]), len(rows) > limit
