"""Episodes: ``POST /v1/episodes`` and ``POST /v1/episodes/batch``."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from cairn.api.auth import require_tenant, services_of
from cairn.api.schemas import (
    EpisodeBatchCreate,
    EpisodeBatchPublic,
    EpisodeCreate,
    EpisodePublic,
    episode_json,
)
from cairn.core.construct import construct
from cairn.core.episodes import NewEpisode
from cairn.core.scope import Scope
from cairn.engine.ingest import record_episodes

router = APIRouter(prefix="/v1/episodes", tags=["episodes"])


def to_new_episode(body: EpisodeCreate) -> NewEpisode:
    """The engine's episode of a validated request body (built without validating again)."""
    return construct(
        NewEpisode,
        {
            "scope": Scope.for_subject(body.subject_id),
            "source": body.source,
            "type": body.type,
            "payload": body.payload,
            "metadata": body.metadata,
            "provenance": body.provenance,
            "session_id": body.session_id,
            "idempotency_key": body.idempotency_key,
            "occurred_at": body.occurred_at,
        },
    )


@router.post("", status_code=201, response_model=EpisodePublic)
async def create_episode(
    body: EpisodeCreate, request: Request, tenant: str = Depends(require_tenant)
) -> JSONResponse:
    """Append one episode. A repeated ``idempotency_key`` returns the original (201).

    The write runs on a worker thread, never on the event loop: on SQLite it may wait for the
    writer lock (a compile holds it while it writes a batch), and the loop must keep serving.
    """
    services = services_of(request)
    episodes, created = await run_in_threadpool(
        record_episodes,
        services.store,
        tenant,
        [to_new_episode(body)],
        services.ingest_listeners,
    )
    services.metrics.episodes_ingested.inc(created)
    return JSONResponse(episode_json(episodes[0]), status_code=201)


@router.post("/batch", status_code=201, response_model=EpisodeBatchPublic)
async def create_episodes(
    body: EpisodeBatchCreate, request: Request, tenant: str = Depends(require_tenant)
) -> JSONResponse:
    """Append 1-100 episodes, all or nothing. An invalid item is a 422 whose field paths
    name its index (``episodes.3.subject_id``), and nothing is written."""
    services = services_of(request)
    episodes, created = await run_in_threadpool(
        record_episodes,
        services.store,
        tenant,
        [to_new_episode(e) for e in body.episodes],
        services.ingest_listeners,
    )
    services.metrics.episodes_ingested.inc(created)
    body_out = {"episodes_created": created, "episodes": [episode_json(e) for e in episodes]}
    return JSONResponse(body_out, status_code=201)
