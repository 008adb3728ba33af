"""The ladder files the server serves, their errors, and reloading them.

- ``GET /v1/ladders`` — every ladder file: its name, status (``ok``; ``stale``: the file is
  invalid now and its previous version still serves; ``invalid``: it never loaded), error,
  model ids and when it was loaded.
- ``GET /v1/ladders/{name}`` — one of them, by ladder name or model id.
- ``POST /v1/ladders/reload`` — re-read the ladders directory now (the watcher does the same
  within a second of a change).

Ladder files are the server's configuration, the same for every tenant; errors name files
relative to the ladders directory.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request

from cairn.http.auth import require_tenant, services_of

router = APIRouter(tags=["ladders"])


def _listing(request: Request) -> dict[str, Any]:
    registry = services_of(request).ladders
    states = [s.to_dict(registry.directory) for s in registry.states()]
    return {
        "ladders": states,
        "serving": registry.names(),
        "errors": sum(1 for s in states if s["error"] is not None),
    }


@router.get("/v1/ladders")
def list_ladder_files(request: Request, tenant: str = Depends(require_tenant)) -> dict[str, Any]:
    """Every ladder file and its status."""
    return _listing(request)


@router.post("/v1/ladders/reload")
def reload_ladders(request: Request, tenant: str = Depends(require_tenant)) -> dict[str, Any]:
    """Re-read the ladders directory; answers with every file's status after the reload."""
    services_of(request).ladders.reload()
    return _listing(request)


@router.get("/v1/ladders/{name}")
def get_ladder_file(
    name: str, request: Request, tenant: str = Depends(require_tenant)
) -> dict[str, Any]:
    """One ladder file by ladder name or model id; 404 ``ladder_not_found``."""
    registry = services_of(request).ladders
    return registry.state(name).to_dict(registry.directory)
