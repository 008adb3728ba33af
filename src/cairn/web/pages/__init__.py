"""The inspector's pages, one module per area, joined into one router under ``/ui``."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse

from cairn.web._render import WebRoute, render_error
from cairn.web._session import Viewer, current_viewer
from cairn.web.pages import auth, context, ladders, memories, slates, subjects, templates

router = APIRouter(route_class=WebRoute, include_in_schema=False)
for _module in (auth, subjects, memories, context, templates, slates, ladders):
    router.include_router(_module.router)


@router.api_route("/ui/{rest:path}", methods=["GET", "POST"])
def not_found(
    request: Request, rest: str, viewer: Viewer = Depends(current_viewer)
) -> HTMLResponse:
    """Any other ``/ui`` address: an HTML 404 with the navigation, not the API's JSON."""
    return render_error(request, 404, "not_found", f"There is no page at /ui/{rest}.")
