"""Liveness, readiness, version and metrics."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from cairn import __version__
from cairn.api.auth import services_of
from cairn.errors import Unavailable

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get("/readyz")
def readyz(request: Request) -> dict[str, str]:
    """The database answers; 503 ``unavailable`` when it does not."""
    services = services_of(request)
    if not services.store.db.ping():
        raise Unavailable("the database is not reachable", details={"database": "down"})
    return {"status": "ready", "database": services.store.dialect}


@router.get("/v1/version")
def version(request: Request) -> dict[str, str]:
    return {"version": __version__, "database": services_of(request).store.dialect}


@router.get("/metrics", include_in_schema=False)
def metrics(request: Request) -> Response:
    metrics = services_of(request).metrics
    return Response(metrics.exposition(), media_type=metrics.content_type)
