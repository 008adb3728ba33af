"""Subjects: the list with counts, a subject's timeline, one episode, and deleting a subject.

Reads and the delete go through the same store calls the ``/v1/subjects`` and ``/v1/timeline``
routes make, so the page and the API can never disagree.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from cairn.core.episodes import Episode
from cairn.core.memories import Memory
from cairn.core.scope import Scope
from cairn.core.subject_id import SubjectIdStr
from cairn.engine.lifecycle import erase_subject
from cairn.errors import NotFound
from cairn.http.auth import services_of
from cairn.store.timeline import read_timeline
from cairn.web._render import WebRoute, render, see_other
from cairn.web._session import Viewer, check_csrf, current_viewer

router = APIRouter(route_class=WebRoute)

PAGE_SIZE = 50
TIMELINE_PAGE = 100


@dataclass(frozen=True, slots=True)
class Entry:
    """One row of a timeline: an episode or a memory, at its point in time."""

    at: datetime
    order: int
    episode: Episode | None = None
    memory: Memory | None = None


def subject_url(subject_id: str, **params: Any) -> str:
    query = urlencode({k: v for k, v in params.items() if v not in (None, "")})
    return f"/ui/subjects/{quote(subject_id, safe='')}" + (f"?{query}" if query else "")


@router.get("/ui/subjects")
def subjects_page(
    request: Request,
    prefix: str = Query("", max_length=256),
    page: int = Query(1, ge=1, le=1_000_000),
    deleted: str | None = Query(None, max_length=256),
    episodes_deleted: int = Query(0, ge=0),
    memories_deleted: int = Query(0, ge=0),
    viewer: Viewer = Depends(current_viewer),
) -> HTMLResponse:
    store = services_of(request).store
    prefix = prefix.strip()
    items, total = store.subjects.list(
        viewer.tenant, limit=PAGE_SIZE, offset=(page - 1) * PAGE_SIZE, prefix=prefix or None
    )
    pages = max(1, -(-total // PAGE_SIZE))
    return render(
        request,
        "subjects.html",
        {
            "subjects": items,
            "total": total,
            "prefix": prefix,
            "page": page,
            "pages": pages,
            "deleted": deleted,
            "episodes_deleted": episodes_deleted,
            "memories_deleted": memories_deleted,
            "subject_url": subject_url,
        },
    )


@router.get("/ui/subjects/{subject_id}")
def timeline_page(
    request: Request,
    subject_id: Annotated[SubjectIdStr, Path()],
    show: str = Query("all", pattern="^(all|episodes|memories)$"),
    kind: str = Query("", max_length=64),
    session: str = Query("", max_length=256),
    page: int = Query(1, ge=1, le=1_000_000),
    viewer: Viewer = Depends(current_viewer),
) -> HTMLResponse:
    """Episodes and memories of one subject in time order, with filters."""
    store = services_of(request).store
    scope = Scope.for_subject(subject_id)
    offset = (page - 1) * TIMELINE_PAGE
    timeline = read_timeline(
        store,
        viewer.tenant,
        scope,
        limit=TIMELINE_PAGE,
        offset=offset,
        kind=kind or None,
        session_id=session or None,
        facets=True,
    )
    has_more = timeline.episodes_has_more or timeline.memories_has_more
    episodes, memories = timeline.episodes, timeline.memories
    kinds, sessions = timeline.kinds, timeline.sessions
    total_episodes, total_memories = timeline.total_episodes, timeline.total_memories
    if kind:
        episodes = []
    if show == "episodes":
        memories = []
    elif show == "memories":
        episodes = []
    entries = [Entry(e.occurred_at, 0, episode=e) for e in episodes]
    entries += [Entry(m.valid_from or m.created_at, 1, memory=m) for m in memories]
    entries.sort(key=lambda x: (x.at, x.order))
    by_id = {m.id: m for m in memories}
    shown_episodes = {e.id for e in episodes}
    supersedes: dict[uuid.UUID, list[uuid.UUID]] = {}
    for m in memories:
        if m.superseded_by is not None:
            supersedes.setdefault(m.superseded_by, []).append(m.id)
    if not entries and total_episodes == 0 and total_memories == 0:
        raise NotFound(
            f"No subject '{subject_id}' in tenant '{viewer.tenant}': it has no episodes or "
            "memories.",
            code="subject_not_found",
        )
    return render(
        request,
        "timeline.html",
        {
            "subject_id": subject_id,
            "entries": entries,
            "show": show,
            "kind": kind,
            "session": session,
            "kinds": kinds,
            "sessions": sessions,
            "page": page,
            "has_more": has_more,
            "total_episodes": total_episodes,
            "total_memories": total_memories,
            "memories_by_id": by_id,
            "shown_episodes": shown_episodes,
            "supersedes": supersedes,
            "subject_url": subject_url,
            "filtered": bool(kind or session or show != "all"),
        },
    )


@router.get("/ui/episodes/{episode_id}")
def episode_page(
    request: Request, episode_id: uuid.UUID, viewer: Viewer = Depends(current_viewer)
) -> HTMLResponse:
    """One episode in full (payload, metadata, provenance)."""
    episode = services_of(request).store.episodes.get(viewer.tenant, episode_id)
    if episode is None:
        raise NotFound(f"No episode {episode_id} in this tenant.", code="episode_not_found")
    return render(request, "episode.html", {"episode": episode, "subject_url": subject_url})


def _counts(request: Request, tenant: str, subject_id: str) -> tuple[int, int]:
    store = services_of(request).store
    scope = Scope.for_subject(subject_id)
    with store.snapshot() as tx:
        return (
            tx.episodes.count(tenant, scope),
            tx.memories.count(tenant, scope),
        )


@router.get("/ui/subjects/{subject_id}/delete")
def confirm_delete_page(
    request: Request,
    subject_id: Annotated[SubjectIdStr, Path()],
    viewer: Viewer = Depends(current_viewer),
) -> HTMLResponse:
    """The confirmation: what deleting this subject will remove."""
    n_episodes, n_memories = _counts(request, viewer.tenant, subject_id)
    if n_episodes == 0 and n_memories == 0:
        raise NotFound(f"No subject '{subject_id}' in this tenant.", code="subject_not_found")
    return render(
        request,
        "subject_delete.html",
        {
            "subject_id": subject_id,
            "episode_count": n_episodes,
            "memory_count": n_memories,
            "subject_url": subject_url,
        },
    )


@router.post("/ui/subjects/{subject_id}/delete", dependencies=[Depends(check_csrf)])
def delete_subject(
    request: Request,
    subject_id: Annotated[SubjectIdStr, Path()],
    viewer: Viewer = Depends(current_viewer),
) -> RedirectResponse:
    """Delete everything of the subject in the viewer's tenant, as ``DELETE /v1/subjects``."""
    services = services_of(request)
    # Memories as the confirmation counted them: a forgotten memory's tombstone is a row the
    # erasure removes too, but it was no memory of the subject's any more.
    _, shown = _counts(request, viewer.tenant, subject_id)
    counts = erase_subject(services.store, viewer.tenant, subject_id, caches=services.search_caches)
    query = urlencode(
        {
            "deleted": subject_id,
            "episodes_deleted": counts.get("episodes", 0),
            "memories_deleted": min(shown, counts.get("memories", 0)),
        }
    )
    return see_other(f"/ui/subjects?{query}")
