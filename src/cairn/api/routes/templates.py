"""Memory templates: list, get, and apply (``/v1/memory-templates``).

Templates are read-only and the same for every tenant; applying one writes an ordinary episode
into the caller's tenant through the normal ingest path.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, Literal

from fastapi import APIRouter, Depends, Path, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, Field

from cairn.api.schemas import EpisodePublic
from cairn.core.ids import UtcDateTime
from cairn.core.scope import Scope
from cairn.core.subject_id import SubjectIdStr
from cairn.core.text import NoNul
from cairn.engine.ingest import record_episode
from cairn.http.auth import require_tenant, services_of
from cairn.templates import MemoryTemplate, apply_template


class _TemplateFirst(APIRoute):
    """A template that does not exist is 404 ``template_not_found`` even when the body is
    also bad (seed 000: "404 if the template does not exist"): the framework checks a body
    before the route runs, so its 422 would come first."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def template_first(request: Request) -> Response:
            try:
                return await handler(request)
            except RequestValidationError:
                template_id = request.path_params.get("template_id")
                if isinstance(template_id, str):
                    services_of(request).templates.get(template_id)  # 404 when unknown
                raise

        return template_first


router = APIRouter(
    prefix="/v1/memory-templates", tags=["memory-templates"], route_class=_TemplateFirst
)

TemplateIdPath = Path(description="The template's id (any unknown id is 404 template_not_found).")


class TemplateFieldPublic(BaseModel):
    name: str
    type: Literal["string", "text"]
    required: bool
    description: str | None


class MemoryTemplatePublic(BaseModel):
    id: str
    version: int
    title: str
    description: str | None
    episode_type: str
    fields: list[TemplateFieldPublic]
    content_template: str

    @classmethod
    def of(cls, template: MemoryTemplate) -> MemoryTemplatePublic:
        return cls.model_validate(template.public())


class MemoryTemplateListPublic(BaseModel):
    templates: list[MemoryTemplatePublic]


class TemplateApply(BaseModel):
    """``values`` maps field names to strings; they are checked against the template in the
    handler so each problem gets its own error code (see docs/templates.md)."""

    model_config = ConfigDict(extra="forbid")

    subject_id: SubjectIdStr
    session_id: NoNul | None = Field(None, min_length=1, max_length=256)
    values: dict[str, Any]
    idempotency_key: NoNul | None = Field(None, min_length=1, max_length=256)
    occurred_at: UtcDateTime | None = None


@router.get("", response_model=MemoryTemplateListPublic)
def list_templates(
    request: Request, tenant: str = Depends(require_tenant)
) -> MemoryTemplateListPublic:
    """Every template with its full field schema, ordered by id."""
    catalogue = services_of(request).templates
    return MemoryTemplateListPublic(
        templates=[MemoryTemplatePublic.of(t) for t in catalogue.templates()]
    )


@router.get("/{template_id}", response_model=MemoryTemplatePublic)
def get_template(
    request: Request, template_id: str = TemplateIdPath, tenant: str = Depends(require_tenant)
) -> MemoryTemplatePublic:
    """One template; 404 ``template_not_found`` if there is none with this id."""
    return MemoryTemplatePublic.of(services_of(request).templates.get(template_id))


@router.post("/{template_id}/apply", status_code=201, response_model=EpisodePublic)
def apply(
    body: TemplateApply,
    request: Request,
    template_id: str = TemplateIdPath,
    tenant: str = Depends(require_tenant),
) -> EpisodePublic:
    """Validate ``values`` strictly, render the scaffold and ingest one episode (201).

    422 ``template_unknown_field`` / ``template_missing_field`` / ``template_invalid_value``
    name the field; 404 ``template_not_found``. Nothing is written on any error. A repeated
    ``idempotency_key`` for the subject returns the original episode.
    """
    services = services_of(request)
    template = services.templates.get(template_id)
    item = apply_template(
        template,
        Scope.for_subject(body.subject_id),
        body.values,
        session_id=body.session_id,
        idempotency_key=body.idempotency_key,
        occurred_at=body.occurred_at,
    )
    episode, _ = record_episode(services.store, tenant, item, services.ingest_listeners)
    return EpisodePublic.of(episode)
