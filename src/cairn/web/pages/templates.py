"""Memory templates: the list, and a form per template generated from its field schema.

Applying goes through ``apply_template`` with the same arguments ``POST
/v1/memory-templates/{id}/apply`` passes, so validation, rendering and the stored episode are
exactly the API's.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Path, Request
from fastapi.responses import HTMLResponse
from starlette.concurrency import run_in_threadpool

from cairn.core.scope import Scope
from cairn.core.subject_id import SUBJECT_ID_RULE, subject_id_problem
from cairn.engine.ingest import record_episode
from cairn.errors import InvalidInput
from cairn.http.auth import services_of
from cairn.templates import MemoryTemplate, apply_template
from cairn.web._render import WebRoute, render
from cairn.web._session import Viewer, check_csrf, current_viewer

router = APIRouter(route_class=WebRoute)

TemplateId = Path(max_length=128)


@router.get("/ui/templates")
def templates_page(request: Request, viewer: Viewer = Depends(current_viewer)) -> HTMLResponse:
    catalogue = services_of(request).templates
    return render(request, "templates.html", {"templates": catalogue.templates()})


def _form_page(
    request: Request,
    template: MemoryTemplate,
    form: dict[str, str],
    *,
    error: InvalidInput | None = None,
    episode: Any = None,
    status: int = 200,
) -> HTMLResponse:
    bad_fields: set[str] = set()
    if error is not None and isinstance(error.details, dict):
        bad_fields = set(error.details.get("fields") or [error.details.get("field")])
    return render(
        request,
        "template_form.html",
        {
            "template": template,
            "form": form,
            "error": error,
            "bad_fields": bad_fields,
            "episode": episode,
        },
        status=status,
    )


@router.get("/ui/templates/{template_id}")
def template_page(
    request: Request, template_id: str = TemplateId, viewer: Viewer = Depends(current_viewer)
) -> HTMLResponse:
    template = services_of(request).templates.get(template_id)
    return _form_page(request, template, {})


def _check_form(subject_id: str, session_id: str) -> None:
    """The checks ``TemplateApply`` makes on the API's body, as field errors of the form."""
    problem = subject_id_problem(subject_id)
    if problem is not None:
        raise InvalidInput(
            f"Subject id: it {problem} ({SUBJECT_ID_RULE}).",
            details={"field": "subject_id", "fields": ["subject_id"]},
        )
    if len(session_id) > 256:
        raise InvalidInput(
            "Session id must be at most 256 characters.",
            details={"field": "session_id", "fields": ["session_id"]},
        )


@router.post("/ui/templates/{template_id}", dependencies=[Depends(check_csrf)])
async def apply_page(
    request: Request, template_id: str = TemplateId, viewer: Viewer = Depends(current_viewer)
) -> HTMLResponse:
    """Apply the template with the form's values; show the created episode or the error."""
    services = services_of(request)
    template = services.templates.get(template_id)
    posted = await request.form()
    form = {k: v for k, v in posted.items() if isinstance(v, str)}
    subject_id = form.get("subject_id", "").strip()
    session_id = form.get("session_id", "").strip()
    # An empty box is a value not given: an optional field is then absent from the episode,
    # and a required one is reported missing, as when a JSON body omits it.
    values = {
        f.name: form[f"field.{f.name}"]
        for f in template.fields
        if form.get(f"field.{f.name}", "").strip()
    }
    try:
        _check_form(subject_id, session_id)
        item = apply_template(
            template, Scope.for_subject(subject_id), values, session_id=session_id or None
        )
        # The write runs on a worker thread: on SQLite it may wait for the writer lock, and
        # the event loop must keep serving (as ``POST /v1/episodes`` does).
        episode, created = await run_in_threadpool(
            record_episode, services.store, viewer.tenant, item, services.ingest_listeners
        )
    except InvalidInput as exc:
        return _form_page(request, template, form, error=exc, status=exc.status)
    return _form_page(
        request,
        template,
        {"subject_id": subject_id, "session_id": session_id},
        episode=episode,
        status=201 if created else 200,
    )
