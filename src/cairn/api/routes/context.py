"""Context: the Statewave-compatible ``POST /v1/context`` and the scope-level endpoints that
mirror the memory contracts one to one (``/v1/scopes/context``, ``/turns``, ``/documents``)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field, field_validator

from cairn.api.errors import validate_input
from cairn.api.schemas import EpisodePublic, MemoryPublic
from cairn.core.memory import (
    KEY_MAX_LENGTH,
    Budget,
    ContextRequest,
    ContextResult,
    Document,
    DocumentCommit,
    Turn,
    TurnCommit,
)
from cairn.core.scope import MAX_ID_LENGTH, Scope
from cairn.core.subject_id import SubjectIdStr
from cairn.engine.context.fit import fit_rendering, fit_to_tokens
from cairn.engine.context.render import DefaultRenderer, TemplateRenderer, default_costs
from cairn.engine.documents import delete_document
from cairn.errors import InvalidInput
from cairn.http.auth import require_tenant, services_of
from cairn.http.runtimes import assembly_for
from cairn.services import Services

router = APIRouter(tags=["context"])

PROCEDURE_KINDS = frozenset({"procedure"})


class ContextCreate(BaseModel):
    """Statewave's context request. ``emit_receipt`` and the other receipt fields the
    Statewave SDK may send are accepted and ignored (Cairn keeps no receipts)."""

    model_config = ConfigDict(extra="forbid")

    subject_id: SubjectIdStr
    task: str = Field(min_length=1, max_length=10_000)
    # 0 or absent: the default budget, as in the contracts' Budget.
    max_tokens: int | None = Field(None, ge=0, le=200_000, strict=True)
    session_id: str | None = Field(None, min_length=1, max_length=256)
    emit_receipt: bool | None = None
    query_id: str | None = None
    task_id: str | None = None
    parent_receipt_id: str | None = None
    caller_id: str | None = None
    caller_type: str | None = None

    @field_validator("task")
    @classmethod
    def _task_has_text(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("task must not be blank")
        return value


class ContextBundlePublic(BaseModel):
    subject_id: str
    task: str
    facts: list[MemoryPublic]
    procedures: list[MemoryPublic]
    episodes: list[EpisodePublic]
    provenance: dict[str, Any]
    assembled_context: str
    token_estimate: int


@router.post("/v1/context", response_model=ContextBundlePublic)
def get_context(
    body: ContextCreate, request: Request, tenant: str = Depends(require_tenant)
) -> Response:
    """Ranked, token-bounded context for a subject; ``token_estimate`` (the rendered
    ``assembled_context`` counted with the server's tokenizer) never exceeds ``max_tokens``."""
    return _context(services_of(request), body, tenant)


def _context(services: Services, body: ContextCreate, tenant: str) -> Response:
    assembly = assembly_for(services, tenant)
    budget = Budget(max_tokens=body.max_tokens or 0)
    req = validate_input(
        ContextRequest,
        {
            "scope": Scope.for_subject(body.subject_id),
            "conversation_id": body.session_id or "",
            "query": body.task,
            "budget": budget,
        },
    )
    # The budget bounds the rendered text, so packing charges the block and its markers
    # (a few short texts every request repeats: counted through the assembly's count cache).
    reserved, overhead = default_costs(assembly.memory_counts)
    assembled = assembly.assemble(req, reserved=reserved, overhead=overhead)
    limit = budget.resolved().max_tokens
    result, text, tokens = fit_to_tokens(
        assembled.result, DefaultRenderer(), limit, assembly.tokenizer
    )
    facts: list[MemoryPublic] = []
    procedures: list[MemoryPublic] = []
    episodes: list[EpisodePublic] = []
    sources: set[str] = set()
    for item in result.items:
        memory = assembled.memories.get(item.id)
        if memory is not None:
            if memory.valid_from is None:  # Statewave's Memory needs a valid_from
                memory = memory.model_copy(update={"valid_from": memory.created_at})
            target = procedures if memory.kind in PROCEDURE_KINDS else facts
            target.append(MemoryPublic.of(memory, score=item.score))
            sources.update(str(e) for e in memory.source_episode_ids)
        elif item.id in assembled.episodes:
            episodes.append(EpisodePublic.of(assembled.episodes[item.id]))
            sources.add(item.id)
    provenance = {
        "fact_ids": [str(m.id) for m in facts],
        "procedure_ids": [str(m.id) for m in procedures],
        "episode_ids": [str(e.id) for e in episodes],
        "source_episode_ids": sorted(sources),
        "truncated": result.truncated,
        "items": [
            {
                "id": i.id,
                "kind": i.kind,
                "source_class": i.source_class,
                "score": i.score,
                "token_count": i.token_count,
                "provenance": [p.model_dump(exclude_none=True) for p in i.provenance],
            }
            for i in result.items
        ],
    }
    bundle = ContextBundlePublic.model_construct(
        subject_id=body.subject_id,
        task=body.task,
        facts=facts,
        procedures=procedures,
        episodes=episodes,
        provenance=provenance,
        assembled_context=text,
        token_estimate=tokens,
    )
    return _json(bundle)


def _json(model: BaseModel) -> Response:
    """Serialize once: the models are built here from validated parts, so FastAPI's
    dump-validate-dump of the response model would only repeat work on the hot path."""
    return Response(content=model.model_dump_json(), media_type="application/json")


class RenderOptions(BaseModel):
    """Render the packed items: the default block, or a sandboxed Jinja2 ``template``;
    ``max_chars`` (0: none) is a hard limit: the lowest-ranked items are dropped until the
    rendering fits, and only a rendering too large even without items is a 422
    ``render_too_large``."""

    model_config = ConfigDict(extra="forbid")

    template: str | None = Field(None, min_length=1)
    max_chars: int = Field(default=0, ge=0, strict=True)


class ScopeContextCreate(ContextRequest):
    """A ``ContextRequest``, plus optional rendering."""

    render: RenderOptions | None = None


class ScopeContextPublic(ContextResult):
    rendered: str | None = None


@router.post("/v1/scopes/context", response_model=ScopeContextPublic)
def scope_context(
    body: ScopeContextCreate, request: Request, tenant: str = Depends(require_tenant)
) -> Response:
    """``ContextProvider.context``: packed items for one scope (and optional rendered text)."""
    assembly = assembly_for(services_of(request), tenant)
    req = validate_input(ContextRequest, body.model_dump(exclude={"render"}))
    result = assembly.context(req)
    rendered = None
    if body.render is not None:
        renderer = (
            TemplateRenderer(body.render.template, body.render.max_chars)
            if body.render.template is not None
            else DefaultRenderer(body.render.max_chars)
        )
        result, rendered = fit_rendering(result, renderer)
    return _json(
        ScopeContextPublic.model_construct(
            items=result.items,
            token_count=result.token_count,
            truncated=result.truncated,
            rendered=rendered,
        )
    )


@router.post(
    "/v1/scopes/turns",
    response_model=TurnCommit,
    status_code=201,
    responses={200: {"model": TurnCommit, "description": "The key was seen: the original."}},
)
def commit_turn(
    body: Turn, request: Request, response: Response, tenant: str = Depends(require_tenant)
) -> TurnCommit:
    """``TurnSink.commit_turn``: 201 when stored, 200 with the original when the key was seen."""
    commit = assembly_for(services_of(request), tenant).commit_turn(body)
    if not commit.created:
        response.status_code = 200
    return commit


@router.post(
    "/v1/scopes/documents",
    response_model=DocumentCommit,
    status_code=201,
    responses={200: {"model": DocumentCommit, "description": "The key was seen: the original."}},
)
def put_document(
    body: Document, request: Request, response: Response, tenant: str = Depends(require_tenant)
) -> DocumentCommit:
    """``DocumentSink.put_document``: 201 when stored, 200 with the original for a known key."""
    commit = assembly_for(services_of(request), tenant).put_document(body)
    if not commit.created:
        response.status_code = 200
    return commit


class DocumentDeletedPublic(BaseModel):
    scope: Scope
    dataset_id: str
    document_id: str
    documents_deleted: int = Field(description="Stored versions removed (one per key).")
    chunks_deleted: int


@router.delete("/v1/scopes/documents", response_model=DocumentDeletedPublic)
def delete_scope_document(
    request: Request,
    runtime_id: str = Query(min_length=1, max_length=MAX_ID_LENGTH),
    dataset_id: str = Query(min_length=1, max_length=KEY_MAX_LENGTH),
    document_id: str = Query(min_length=1, max_length=KEY_MAX_LENGTH),
    user_id: str = Query("", max_length=MAX_ID_LENGTH),
    agent_id: str = Query("", max_length=MAX_ID_LENGTH),
    tenant: str = Depends(require_tenant),
) -> DocumentDeletedPublic:
    """Delete a document of a dataset, every version stored of it, with its chunks: the way
    to replace one is to delete it and put the new text. 404 ``document_not_found``."""
    scope = validate_input(
        Scope, {"runtime_id": runtime_id, "user_id": user_id, "agent_id": agent_id}
    )
    dataset, document = dataset_id.strip(), document_id.strip()  # keys are stored trimmed
    if not dataset or not document or "\x00" in dataset + document:
        raise InvalidInput(
            "dataset_id and document_id must be non-blank text", code="validation_error"
        )
    docs, chunks = delete_document(services_of(request).store, tenant, scope, dataset, document)
    return DocumentDeletedPublic(
        scope=scope,
        dataset_id=dataset,
        document_id=document,
        documents_deleted=docs,
        chunks_deleted=chunks,
    )


__all__ = ["router"]
