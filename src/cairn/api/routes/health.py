"""Liveness, readiness, version and metrics."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from cairn import __version__
from cairn.errors import Unavailable
from cairn.http.auth import services_of
from cairn.store import Store

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz(request: Request) -> dict[str, Any]:
    """The process is up. ``ladders`` tells how many ladders serve and which ladder files are
    invalid (the server runs without them). This route needs no key, so it names the files
    only; the messages are in ``GET /v1/ladders/{name}``."""
    registry = services_of(request).ladders
    invalid = [{k: e[k] for k in ("name", "file", "status")} for e in registry.errors()]
    return {"status": "ok", "ladders": {"serving": len(registry.names()), "invalid": invalid}}


@router.get("/readyz")
def readyz(request: Request) -> dict[str, str]:
    """The database answers; 503 ``unavailable`` when it does not."""
    services = services_of(request)
    if not services.store.ping():
        raise Unavailable("the database is not reachable", details={"database": "down"})
    return {"status": "ready", "database": services.store.backend}


@router.get("/v1/version")
def version(request: Request) -> dict[str, str]:
    return {"version": __version__, "database": services_of(request).store.backend}


@router.get("/metrics", include_in_schema=False)
def metrics(request: Request) -> Response:
    metrics = services_of(request).metrics
    body = metrics.exposition() + retention_metrics(services_of(request).store)
    return Response(body, media_type=metrics.content_type)


def retention_metrics(store: Store) -> bytes:
    """The retention audit, from the database (sweeps run in workers, not in this process)."""
    try:
        sweeps, episodes, memories = store.retention.totals()
    except Exception:  # the database is away: the request metrics still answer
        return b""
    lines = [
        "# HELP cairn_retention_sweeps_total Retention sweeps that expired rows.",
        "# TYPE cairn_retention_sweeps_total counter",
        f"cairn_retention_sweeps_total {sweeps}",
        "# HELP cairn_retention_deleted_total Rows expired by retention.",
        "# TYPE cairn_retention_deleted_total counter",
        f'cairn_retention_deleted_total{{kind="episodes"}} {episodes}',
        f'cairn_retention_deleted_total{{kind="memories"}} {memories}',
    ]
    return ("\n".join(lines) + "\n").encode()
