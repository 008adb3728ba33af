"""The web inspector: server-rendered pages at ``/ui`` over the same engine and store as the API.

Pages are Jinja2 templates rendered by the routers in ``cairn.web.pages``; a little plain
JavaScript (``static/cairn.js``) enhances them, and every page also works without it. Signing in
with an API key stores an opaque session token (never the key) in an HTTP-only cookie; the
tenant always comes from that key, exactly as for the API. ``install_web(app)`` mounts
everything on a FastAPI app.
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from cairn.web._render import STATIC_DIR
from cairn.web.pages import router

__all__ = ["install_web", "router"]


def install_web(app: FastAPI) -> None:
    """Add the inspector's pages and its static assets (``/ui/static``) to ``app``."""
    app.mount("/ui/static", StaticFiles(directory=STATIC_DIR), name="ui-static")
    app.include_router(router)
