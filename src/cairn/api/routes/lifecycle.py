"""Single items (``GET/DELETE /v1/episodes/{id}``, ``GET/PATCH/DELETE /v1/memories/{id}``)
and erasure of a person (``DELETE /v1/scopes?user_id=``).

Included after the memories router, so ``/v1/memories/search`` and ``/compile`` keep their
routes (a path segment that is not a UUID never reaches these).
"""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from cairn.api.schemas import EpisodePublic, MemoryPublic
from cairn.core.scope import MAX_ID_LENGTH, Scope
from cairn.engine.lifecycle import (
    MemoryCorrection,
    correct_memory,
    delete_episode,
    erase_partitions,
    forget_memory,
    get_episode,
    memory_history,
)
from cairn.engine.retention import set_policy
from cairn.http.auth import api_key_of, require_tenant, services_of

router = APIRouter(tags=["lifecycle"])

MAX_CONTENT = 100_000


class EpisodeItemPublic(EpisodePublic):
    scope: Scope


class MemoryItemPublic(MemoryPublic):
    scope: Scope


class MemoryDetailPublic(BaseModel):
    memory: MemoryItemPublic
    replaces: list[MemoryItemPublic] = Field(description="Earlier versions, newest first.")
    replaced_by: list[MemoryItemPublic] = Field(
        description="Later versions, oldest first; the last is the current one."
    )
    current_id: uuid.UUID


class MemoryPatch(BaseModel):
    """A correction: every field optional, at least one given."""

    model_config = ConfigDict(extra="forbid")

    content: str | None = Field(None, min_length=1, max_length=MAX_CONTENT)
    kind: str | None = Field(None, min_length=1, max_length=64)
    confidence: float | None = Field(None, ge=0.0, le=1.0, strict=True)  # no bool
    valid_from: AwareDatetime | None = None
    valid_to: AwareDatetime | None = None
    editor: str | None = Field(
        None, max_length=256, description="Who corrects (recorded with the API key's prefix)."
    )
    note: str | None = Field(None, max_length=2000, description="Why (recorded).")


class EpisodeDeletedPublic(BaseModel):
    episode_id: uuid.UUID
    memories_deleted: int


class MemoryDeletedPublic(BaseModel):
    memory_id: uuid.UUID
    deleted: bool


def memory_item(m: Any) -> MemoryItemPublic:
    base = MemoryPublic.of(m)
    return MemoryItemPublic.model_construct(**dict(base), scope=m.scope)


def _actor(request: Request, named: str | None = None) -> str:
    """Who acts, for provenance: the key's printed prefix (never the key), or ``local``
    for a keyless loopback server, with the name the caller gave."""
    key = api_key_of(request)
    who = f"key:{key[:12]}" if key else "local"
    return f"{named} ({who})" if named else who


@router.get("/v1/episodes/{episode_id}", response_model=EpisodeItemPublic)
def read_episode(
    episode_id: uuid.UUID, request: Request, tenant: str = Depends(require_tenant)
) -> EpisodeItemPublic:
    ep = get_episode(services_of(request).store, tenant, episode_id)
    return EpisodeItemPublic.model_construct(**dict(EpisodePublic.of(ep)), scope=ep.scope)


@router.delete("/v1/episodes/{episode_id}", response_model=EpisodeDeletedPublic)
def remove_episode(
    episode_id: uuid.UUID, request: Request, tenant: str = Depends(require_tenant)
) -> EpisodeDeletedPublic:
    """Delete the episode and the memories derived from it alone."""
    services = services_of(request)
    removed = delete_episode(services.store, tenant, episode_id, caches=services.search_caches)
    return EpisodeDeletedPublic(episode_id=episode_id, memories_deleted=removed)


@router.get("/v1/memories/{memory_id}", response_model=MemoryDetailPublic)
def read_memory(
    memory_id: uuid.UUID, request: Request, tenant: str = Depends(require_tenant)
) -> MemoryDetailPublic:
    """The memory with its supersession chain."""
    h = memory_history(services_of(request).store, tenant, memory_id)
    current = h.replaced_by[-1] if h.replaced_by else h.memory
    return MemoryDetailPublic.model_construct(
        memory=memory_item(h.memory),
        replaces=[memory_item(m) for m in h.replaces],
        replaced_by=[memory_item(m) for m in h.replaced_by],
        current_id=current.id,
    )


@router.patch("/v1/memories/{memory_id}", response_model=MemoryItemPublic)
def patch_memory(
    memory_id: uuid.UUID,
    body: MemoryPatch,
    request: Request,
    tenant: str = Depends(require_tenant),
) -> MemoryItemPublic:
    """Correct a memory: a new version supersedes it (409 ``memory_superseded`` when it is
    not the current version)."""
    change = MemoryCorrection(
        content=body.content,
        kind=body.kind,
        confidence=body.confidence,
        valid_from=body.valid_from,
        valid_to=body.valid_to,
        note=body.note,
        # Omitted, valid_to stays as it was; given as null, the fact holds again with no end.
        reopen="valid_to" in body.model_fields_set and body.valid_to is None,
    )
    services = services_of(request)
    memory = correct_memory(
        services.store,
        tenant,
        memory_id,
        change,
        _actor(request, body.editor),
        embedder=services.embedder,
        backfill=services.embedding_backfill,
    )
    return memory_item(memory)


@router.delete("/v1/memories/{memory_id}", response_model=MemoryDeletedPublic)
def delete_memory(
    memory_id: uuid.UUID, request: Request, tenant: str = Depends(require_tenant)
) -> MemoryDeletedPublic:
    """Forget one memory; compiling the same episodes again does not re-create it."""
    services = services_of(request)
    forget_memory(services.store, tenant, memory_id, _actor(request), caches=services.search_caches)
    return MemoryDeletedPublic(memory_id=memory_id, deleted=True)


class ScopesDeletedPublic(BaseModel):
    user_id: str
    runtime_id: str | None
    agent_id: str | None
    partitions: list[Scope] = Field(description="The partitions that held data.")
    deleted: dict[str, int] = Field(description="Rows removed per table.")


@router.delete("/v1/scopes", response_model=ScopesDeletedPublic)
def delete_scopes(
    request: Request,
    user_id: str = Query(min_length=1, max_length=MAX_ID_LENGTH),
    runtime_id: str | None = Query(None, min_length=1, max_length=MAX_ID_LENGTH),
    agent_id: str | None = Query(None, max_length=MAX_ID_LENGTH),
    tenant: str = Depends(require_tenant),
) -> ScopesDeletedPublic:
    """Erase a person: everything of ``user_id`` in every runtime and agent of the caller's
    tenant, or only in one runtime and/or agent (``agent_id=`` empty: the global agent)."""
    services = services_of(request)
    out = erase_partitions(
        services.store,
        tenant,
        user_id,
        runtime_id,
        agent_id,
        caches=services.search_caches,
    )
    return ScopesDeletedPublic.model_construct(
        user_id=user_id,
        runtime_id=runtime_id,
        agent_id=agent_id,
        partitions=out["partitions"],
        deleted=out["deleted"],
    )


class RetentionPolicyBody(BaseModel):
    """The tenant's time-to-live; ``null`` keeps forever."""

    model_config = ConfigDict(extra="forbid")

    # Strict: ``true`` is no number of days (it read as 1, expiring all but the last day).
    episode_ttl_days: int | None = Field(
        None, strict=True, description="Expire episodes older than this."
    )
    memory_ttl_days: int | None = Field(
        None, strict=True, description="Expire memories older than this."
    )


@router.get("/v1/retention", response_model=RetentionPolicyBody)
def get_retention(request: Request, tenant: str = Depends(require_tenant)) -> RetentionPolicyBody:
    """The caller's tenant's retention policy."""
    policy = services_of(request).store.retention.get(tenant)
    return RetentionPolicyBody(
        episode_ttl_days=policy.episode_ttl_days, memory_ttl_days=policy.memory_ttl_days
    )


@router.put("/v1/retention", response_model=RetentionPolicyBody)
def put_retention(
    body: RetentionPolicyBody, request: Request, tenant: str = Depends(require_tenant)
) -> RetentionPolicyBody:
    """Set the tenant's retention policy; the worker's next sweep enforces it."""
    store = services_of(request).store
    policy = set_policy(store, tenant, body.episode_ttl_days, body.memory_ttl_days)
    return RetentionPolicyBody(
        episode_ttl_days=policy.episode_ttl_days, memory_ttl_days=policy.memory_ttl_days
    )
