"""Rendering: the Jinja2 environment, the page helper, and the route class that turns errors
into HTML pages (the API's JSON error shape is for machines; people get a readable page)."""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Callable, Coroutine
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.routing import APIRoute
from fastapi.templating import Jinja2Templates
from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup, escape

from cairn.core.ids import as_utc
from cairn.core.validation import validation_details
from cairn.errors import CairnError
from cairn.web._session import SignInRequired, csrf_token, persist_csrf

WEB_DIR = Path(__file__).parent
TEMPLATES_DIR = WEB_DIR / "templates"
STATIC_DIR = WEB_DIR / "static"

# The navigation, in reading order: (endpoint path, label).
NAV: list[tuple[str, str]] = [
    ("/ui/subjects", "Subjects"),
    ("/ui/context", "Context"),
    ("/ui/templates", "Templates"),
    ("/ui/slates", "Slates"),
    ("/ui/ladders", "Ladders"),
    ("/ui/runs", "Runs"),
]


def _when(value: datetime | None) -> str:
    if value is None:
        return ""
    return as_utc(value).strftime("%Y-%m-%d %H:%M:%S UTC")


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


def _direction(ch: str) -> str:
    """``r`` for a right-to-left character (its bidirectional class R or AL, any plane; the
    right-to-left mark), ``d`` for a digit, ``o`` for anything else."""
    if ch == "\u200f" or unicodedata.bidirectional(ch) in ("R", "AL"):
        return "r"
    return "d" if ch.isdigit() else "o"


def _ident(value: Any) -> Markup:
    """An id as HTML that shows its characters in their order: a right-to-left run is shown
    right to left within itself, but the runs stay in the id's order, left to right. As plain
    text the bidirectional algorithm reorders an id mixing scripts and digits, so
    ``user:mixed-עברית-123`` and ``user:mixed-123-עברית`` looked the same (on the page that
    deletes one)."""
    text = str(value)
    kinds = [_direction(ch) for ch in text]
    if "r" not in kinds:
        return Markup(escape(text))
    runs, start = [], 0
    for i in range(1, len(text) + 1):
        if i == len(text) or kinds[i] != kinds[start]:
            runs.append(f"<bdi>{escape(text[start:i])}</bdi>")
            start = i
    return Markup(f'<span dir="ltr" class="ident">{"".join(runs)}</span>')


def _environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES_DIR),
        autoescape=select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["when"] = _when
    env.filters["pretty"] = _pretty
    env.filters["urlpart"] = lambda v: quote(str(v), safe="")
    env.filters["ident"] = _ident
    return env


templates = Jinja2Templates(env=_environment())


def render(
    request: Request, name: str, context: dict[str, Any] | None = None, status: int = 200
) -> HTMLResponse:
    """Render a page with what every page needs (viewer, navigation, CSRF token)."""
    ctx: dict[str, Any] = {
        "viewer": getattr(request.state, "viewer", None),
        "nav": NAV,
        "path": request.url.path,
        "csrf": csrf_token(request),
    }
    ctx.update(context or {})
    response = templates.TemplateResponse(request, name, ctx, status_code=status)
    response.headers["Cache-Control"] = "no-store"
    persist_csrf(request, response)
    return response


def render_error(
    request: Request, status: int, code: str, message: str, details: Any = None
) -> HTMLResponse:
    return render(
        request,
        "error.html",
        {"status": status, "code": code, "message": message, "details": details},
        status=status,
    )


def see_other(url: str) -> RedirectResponse:
    """Post/redirect/get: a 303 to the page that shows the result."""
    return RedirectResponse(url, status_code=303)


class WebRoute(APIRoute):
    """An APIRoute whose errors become HTML: sign-in redirects, domain errors and bad input."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def page(request: Request) -> Response:
            try:
                return await handler(request)
            except SignInRequired as exc:
                target = request.url.path
                if request.url.query and request.method == "GET":
                    target += "?" + request.url.query
                url = f"/ui/login?next={quote(target, safe='')}"
                if exc.reason:
                    url += f"&reason={quote(exc.reason, safe='')}"
                return see_other(url)
            except CairnError as exc:
                return render_error(request, exc.status, exc.code, exc.message, exc.details)
            except RequestValidationError as exc:
                details = validation_details(list(exc.errors()))
                return render_error(
                    request, 422, "validation_error", "Some of the input is not valid.", details
                )

        return page
