"""Memories: compile (sync or as a job) and search.

- ``POST /v1/memories/compile`` ``{subject_id}`` → 200 with what was compiled;
  ``{subject_id, async: true}`` → 202 ``{job_id, status, subject_id}`` (the job as
  ``GET /v1/memories/compile/{job_id}`` shows it, as Statewave's SDK reads it).
- ``POST /v1/scopes/compile`` ``{scope, async?}``: the same for any scope (runtime, user,
  agent), e.g. one whose turns came through ``POST /v1/scopes/turns``.
- ``GET /v1/memories/compile/{job_id}`` → the job (404 for another tenant's job).
- ``GET /v1/memories/search?subject_id=&q=&kind=&limit=&semantic=&hybrid=`` → scored memories;
  without ``q``, the subject's memories (of ``kind``, if given), newest first.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from cairn.api.schemas import MemoryPublic
from cairn.core.memories import Memory
from cairn.core.scope import Scope
from cairn.core.subject_id import SubjectIdStr
from cairn.engine.compile import KINDS, compile_request
from cairn.engine.search import search_memories
from cairn.errors import InvalidInput, NotFound
from cairn.http.auth import require_tenant, services_of
from cairn.services import Services

router = APIRouter(prefix="/v1/memories", tags=["memories"])
scopes_router = APIRouter(tags=["memories"])


class _CompileOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_async: bool = Field(
        False, alias="async", strict=True, description="Queue a job and answer 202."
    )


class CompileRequest(_CompileOptions):
    subject_id: SubjectIdStr


class _CompileOutcome(BaseModel):
    memories_created: int
    memories: list[MemoryPublic]
    has_more: bool
    remaining_episodes: int


class CompilePublic(_CompileOutcome):
    subject_id: str


class CompileJobQueued(BaseModel):
    job_id: uuid.UUID
    status: str
    subject_id: str | None = None
    scope: Scope | None = None
    memories_created: int = 0
    memories: list[MemoryPublic] = []
    error: str | None = None


class CompileJobPublic(BaseModel):
    job_id: uuid.UUID
    status: str
    subject_id: str
    memories_created: int
    memories: list[MemoryPublic]
    error: str | None


class SearchPublic(BaseModel):
    memories: list[MemoryPublic]


def public_status(status: str) -> str:
    """A job's status as the API names it: Statewave's ``completed`` for the store's
    ``succeeded`` (its SDK's ``compile_memories_wait`` polls until ``completed``)."""
    return "completed" if status == "succeeded" else status


def _compile(
    request: Request, tenant: str, scope: Scope, run_async: bool, answer: dict[str, Any]
) -> JSONResponse:
    """Compile one partition now (200), or queue a job for the worker (202)."""
    services = services_of(request)
    if run_async:
        job = services.store.jobs.enqueue(tenant, scope)
        if services.compile_worker is not None:
            services.compile_worker.wake()
        # The whole job as GET .../compile/{job_id} shows it (Statewave's CompileJob needs
        # subject_id), plus the request's own subject or scope.
        queued = {"job_id": str(job.id), "status": public_status(job.status), **answer}
        queued.update(memories_created=0, memories=[], error=None)
        return JSONResponse(status_code=202, content=queued)
    result = compile_request(
        services.store,
        tenant,
        scope,
        compiler=services.compiler,
        backfill=services.embedding_backfill,
        tracing=services.metrics.tracing,
    )
    services.metrics.memories_compiled.inc(result.memories_created)
    return JSONResponse(
        {
            **answer,
            "memories_created": result.memories_created,
            "memories": [MemoryPublic.of(m).model_dump(mode="json") for m in result.memories],
            "has_more": result.has_more,
            "remaining_episodes": result.remaining_episodes,
        }
    )


@router.post("/compile", response_model=CompilePublic, responses={202: {"model": CompileJobQueued}})
def compile_memories(
    body: CompileRequest, request: Request, tenant: str = Depends(require_tenant)
) -> JSONResponse:
    """Compile the subject's uncompiled episodes (a batch per call: see ``has_more``)."""
    return _compile(
        request,
        tenant,
        Scope.for_subject(body.subject_id),
        body.run_async,
        {"subject_id": body.subject_id},
    )


class ScopeCompileRequest(_CompileOptions):
    scope: Scope


class ScopeCompilePublic(_CompileOutcome):
    scope: Scope


@scopes_router.post(
    "/v1/scopes/compile",
    response_model=ScopeCompilePublic,
    responses={202: {"model": CompileJobQueued}},
)
def compile_scope_memories(
    body: ScopeCompileRequest, request: Request, tenant: str = Depends(require_tenant)
) -> JSONResponse:
    """Compile one scope's uncompiled episodes (its committed turns included): the
    scope-level twin of ``POST /v1/memories/compile``, for scopes that are not a subject."""
    return _compile(request, tenant, body.scope, body.run_async, {"scope": body.scope.model_dump()})


@router.get("/compile/{job_id}", response_model=CompileJobPublic)
def get_compile_job(
    job_id: uuid.UUID, request: Request, tenant: str = Depends(require_tenant)
) -> CompileJobPublic:
    store = services_of(request).store
    job = store.jobs.get(tenant, job_id)
    if job is None:
        raise NotFound(f"no compile job {job_id}", code="job_not_found")
    # A job lists its memories by seq and creation time (older jobs by id): a seq SQLite
    # reused for a later memory is not this job's.
    seqs = [m[0] for m in job.memories if isinstance(m, tuple)]
    ids = [m for m in job.memories if isinstance(m, uuid.UUID)]
    with store.snapshot() as tx:
        by_seq = tx.memories.by_seqs(tenant, job.scope, seqs)
        by_id = {m.id: m for m in tx.memories.by_ids(tenant, ids)}
    memories: list[Memory] = []
    for entry in job.memories:
        if isinstance(entry, uuid.UUID):
            if entry in by_id:
                memories.append(by_id[entry])
            continue
        found = by_seq.get(entry[0])
        if found is not None and found.created_at == entry[1]:
            memories.append(found)
    return CompileJobPublic.model_construct(
        job_id=job.id,
        status=public_status(job.status),
        subject_id=job.scope.user_id,
        memories_created=job.memories_created,
        memories=[MemoryPublic.of(m) for m in memories],
        error=job.error,
    )


@router.get("/search", response_model=SearchPublic)
def search(
    request: Request,
    subject_id: Annotated[SubjectIdStr, Query()],
    q: str | None = Query(
        None,
        min_length=1,
        max_length=2000,
        description="What to look for; without it, the subject's memories newest first.",
    ),
    kind: list[str] | None = Query(None, description="Only these kinds (repeatable)."),
    limit: int = Query(10, ge=1, le=200),
    semantic: bool = Query(False, description="Vector lane only (needs an embedder)."),
    hybrid: bool = Query(False, description="Lexical and vector lanes (needs an embedder)."),
    include_superseded: bool = Query(False, description="Also superseded memories."),
    tenant: str = Depends(require_tenant),
) -> SearchPublic:
    """Memories of the subject ranked by relevance; each ``score`` is in [0, 1]."""
    services = services_of(request)
    kinds = [k.strip() for part in kind or [] for k in part.split(",") if k.strip()]
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        raise InvalidInput(
            f"unknown kind {', '.join(unknown)}; kinds are {', '.join(KINDS)}",
            code="unknown_kind",
        )
    if q is None:
        listed = _list_by_kind(services, tenant, subject_id, kinds, limit, include_superseded)
        return SearchPublic.model_construct(memories=[MemoryPublic.of(m) for m in listed])
    lanes = None
    if semantic and not hybrid:
        lanes = ["vector"]
    elif hybrid:
        lanes = ["lexical", "vector"]
    results = search_memories(
        services.store,
        tenant,
        Scope.for_subject(subject_id),
        q,
        limit=limit,
        kinds=kinds or None,
        include_superseded=include_superseded,
        embedder=services.embedder,
        lanes=lanes,
        caches=services.search_caches,
    )
    return SearchPublic.model_construct(
        memories=[MemoryPublic.of(r.memory, score=r.score) for r in results]
    )


def _list_by_kind(
    services: Services,
    tenant: str,
    subject_id: str,
    kinds: list[str],
    limit: int,
    include_superseded: bool,
) -> list[Any]:
    """The subject's memories of ``kinds`` (all kinds when empty), newest first: search by kind
    alone, as Statewave's ``search_memories(subject, kind=...)`` asks for it."""
    store = services.store
    scope = Scope.for_subject(subject_id)
    page: dict[str, Any] = {
        "limit": limit,
        "newest_first": True,
        "include_superseded": include_superseded,
    }
    wanted: list[str | None] = list(kinds) or [None]
    with store.snapshot() as tx:
        found = [m for kind in wanted for m in tx.memories.list(tenant, scope, kind=kind, **page)]
    # The store's own order (valid_from, then insertion), newest first across the kinds.
    found.sort(key=lambda m: (m.valid_from or m.created_at, m.seq), reverse=True)
    return found[:limit]
