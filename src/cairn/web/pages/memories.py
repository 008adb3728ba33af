"""One memory: its history, correcting it, forgetting it; and a subject's export download.

Every action goes through the same engine calls as ``PATCH/DELETE /v1/memories/{id}`` and
``GET /v1/subjects/{id}/export``, so the page and the API cannot disagree.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form, Path, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse

from cairn.core.subject_id import SubjectIdStr
from cairn.engine.lifecycle import (
    MemoryCorrection,
    correct_memory,
    export_lines,
    forget_memory,
    memory_history,
)
from cairn.errors import InvalidInput
from cairn.http.auth import services_of
from cairn.http.headers import attachment
from cairn.web._render import WebRoute, render, see_other
from cairn.web._session import Viewer, check_csrf, current_viewer
from cairn.web.pages.subjects import subject_url

router = APIRouter(route_class=WebRoute)

MAX_CONTENT = 100_000


def _editor(viewer: Viewer) -> str:
    """Who acts, for provenance: the signed-in key's printed prefix, or ``local``."""
    return f"inspector (key:{viewer.key_prefix})" if viewer.key_prefix else "inspector (local)"


def memory_url(memory_id: uuid.UUID | str) -> str:
    return f"/ui/memories/{memory_id}"


@router.get("/ui/memories/{memory_id}")
def memory_page(
    request: Request, memory_id: uuid.UUID, viewer: Viewer = Depends(current_viewer)
) -> HTMLResponse:
    """The memory, the versions it replaced and the versions that replaced it."""
    return _memory_page(request, viewer, memory_id)


def _memory_page(
    request: Request,
    viewer: Viewer,
    memory_id: uuid.UUID,
    edit: dict[str, Any] | None = None,
    status: int = 200,
) -> HTMLResponse:
    """The memory's page; ``edit``: a correction refused (its error and what was typed)."""
    history = memory_history(services_of(request).store, viewer.tenant, memory_id)
    current = history.replaced_by[-1] if history.replaced_by else history.memory
    return render(
        request,
        "memory.html",
        {
            "h": history,
            "m": history.memory,
            "current": current,
            "memory_url": memory_url,
            "subject_url": subject_url,
            "edit": edit,
        },
        status=status,
    )


@router.post("/ui/memories/{memory_id}/edit", dependencies=[Depends(check_csrf)])
def edit_memory(
    request: Request,
    memory_id: uuid.UUID,
    content: str = Form("", max_length=MAX_CONTENT),
    note: str = Form("", max_length=2000),
    viewer: Viewer = Depends(current_viewer),
) -> Response:
    """Store the correction as a new version (as ``PATCH /v1/memories/{id}``); a correction
    refused (blank, or the same as this version) is shown next to the form, as typed."""
    typed = {"content": content, "note": note}
    if not content.strip():
        error = {"code": "validation_error", "message": "The corrected content is blank."}
        return _memory_page(request, viewer, memory_id, {**typed, "error": error}, 422)
    change = MemoryCorrection(content=content, note=note.strip() or None)
    services = services_of(request)
    try:
        new = correct_memory(
            services.store,
            viewer.tenant,
            memory_id,
            change,
            _editor(viewer),
            embedder=services.embedder,
            backfill=services.embedding_backfill,
        )
    except InvalidInput as exc:
        error = {"code": exc.code, "message": exc.message}
        return _memory_page(request, viewer, memory_id, {**typed, "error": error}, exc.status)
    return see_other(memory_url(new.id) + "?corrected=1")


@router.get("/ui/memories/{memory_id}/delete")
def confirm_forget_page(
    request: Request, memory_id: uuid.UUID, viewer: Viewer = Depends(current_viewer)
) -> HTMLResponse:
    """The confirmation before forgetting a memory."""
    history = memory_history(services_of(request).store, viewer.tenant, memory_id)
    return render(
        request,
        "memory_delete.html",
        {"m": history.memory, "memory_url": memory_url, "subject_url": subject_url},
    )


@router.post("/ui/memories/{memory_id}/delete", dependencies=[Depends(check_csrf)])
def forget(
    request: Request, memory_id: uuid.UUID, viewer: Viewer = Depends(current_viewer)
) -> RedirectResponse:
    """Forget the memory (as ``DELETE /v1/memories/{id}``) and go back to its subject."""
    services = services_of(request)
    memory = forget_memory(
        services.store, viewer.tenant, memory_id, _editor(viewer), caches=services.search_caches
    )
    sid = memory.scope.subject_id
    return see_other(subject_url(sid, forgotten=str(memory_id)) if sid else "/ui/subjects")


@router.get("/ui/subjects/{subject_id}/export")
def export_download(
    request: Request,
    subject_id: Annotated[SubjectIdStr, Path()],
    viewer: Viewer = Depends(current_viewer),
) -> StreamingResponse:
    """The subject's export as a JSON-lines download (as ``GET /v1/subjects/{id}/export``)."""
    return StreamingResponse(
        export_lines(services_of(request).store, viewer.tenant, subject_id),
        media_type="application/x-ndjson",
        headers=attachment(f"cairn-{subject_id}.jsonl"),
    )
