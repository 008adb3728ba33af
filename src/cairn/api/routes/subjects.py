"""Subjects and their timeline: ``GET /v1/timeline``, ``GET/DELETE /v1/subjects``."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request

from cairn.api.schemas import (
    EpisodePublic,
    MemoryPublic,
    SubjectDeletedPublic,
    SubjectListPublic,
    SubjectPublic,
    TimelinePublic,
)
from cairn.core.scope import Scope
from cairn.core.subject_id import SubjectIdStr
from cairn.engine.lifecycle import erase_subject
from cairn.http.auth import require_tenant, services_of
from cairn.store.timeline import read_timeline

router = APIRouter(tags=["subjects"])


@router.get("/v1/timeline", response_model=TimelinePublic)
def timeline(
    request: Request,
    subject_id: Annotated[SubjectIdStr, Query()],
    limit: int = Query(100, ge=1, le=1000),
    offset: int = Query(0, ge=0, le=1_000_000_000),
    newest_first: bool = Query(False, description="Page from the newest end."),
    tenant: str = Depends(require_tenant),
) -> TimelinePublic:
    """Episodes and memories of a subject in time order, each paged by limit/offset.

    With ``newest_first`` the window is taken from the newest end (``offset`` counts back);
    rows inside a page are always oldest first.
    """
    page = read_timeline(
        services_of(request).store,
        tenant,
        Scope.for_subject(subject_id),
        limit=limit,
        offset=offset,
        newest_first=newest_first,
    )
    return TimelinePublic.model_construct(
        subject_id=subject_id,
        episodes=[EpisodePublic.of(e) for e in page.episodes],
        memories=[MemoryPublic.of(m) for m in page.memories],
        episodes_has_more=page.episodes_has_more,
        memories_has_more=page.memories_has_more,
    )


@router.get("/v1/subjects", response_model=SubjectListPublic)
def list_subjects(
    request: Request,
    limit: int = Query(100, ge=1, le=1000),
    offset: int = Query(0, ge=0, le=1_000_000_000),
    prefix: str | None = Query(None, max_length=256, description="Only ids starting with this."),
    tenant: str = Depends(require_tenant),
) -> SubjectListPublic:
    items, total = services_of(request).store.subjects.list(
        tenant, limit=limit, offset=offset, prefix=prefix
    )
    return SubjectListPublic.model_construct(
        subjects=[
            SubjectPublic(
                subject_id=s.subject_id, episode_count=s.episode_count, memory_count=s.memory_count
            )
            for s in items
        ],
        total=total,
    )


@router.delete("/v1/subjects/{subject_id}", response_model=SubjectDeletedPublic)
def delete_subject(
    request: Request,
    subject_id: Annotated[SubjectIdStr, Path()],
    tenant: str = Depends(require_tenant),
) -> SubjectDeletedPublic:
    """Remove everything of the subject's partition ``("default", id, "")`` in the caller's
    tenant, whichever API wrote it (ladder runs and per-user slates of the user too)."""
    services = services_of(request)
    counts = erase_subject(services.store, tenant, subject_id, caches=services.search_caches)
    return SubjectDeletedPublic(
        subject_id=subject_id,
        episodes_deleted=counts.get("episodes", 0),
        memories_deleted=counts.get("memories", 0),
        deleted=counts,
    )
