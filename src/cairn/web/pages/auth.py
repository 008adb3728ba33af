"""Signing in and out. The key is checked by the same function the API's auth uses."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from cairn.errors import AuthError
from cairn.http.auth import services_of
from cairn.web._render import WebRoute, render, see_other
from cairn.web._session import (
    check_csrf,
    clear_session,
    open_mode,
    set_session,
    sign_in,
    sign_out,
)

router = APIRouter(route_class=WebRoute)

HOME = "/ui/subjects"


def safe_next(target: str | None) -> str:
    """Only a path inside the inspector may be a redirect target (no open redirects)."""
    if target and target.startswith("/ui") and not target.startswith("//") and "\\" not in target:
        return target
    return HOME


@router.get("/ui")
@router.get("/ui/")
def home() -> RedirectResponse:
    return see_other(HOME)


@router.get("/ui/login")
def login_page(
    request: Request,
    next: str | None = Query(None, max_length=2048),
    reason: str | None = Query(None, max_length=300),
) -> HTMLResponse:
    return render(
        request,
        "login.html",
        {
            "next": safe_next(next),
            "reason": reason,
            "open_mode": open_mode(services_of(request)),
            "error": None,
        },
    )


@router.post("/ui/login", dependencies=[Depends(check_csrf)], response_model=None)
def login(
    request: Request,
    api_key: str = Form("", max_length=512),
    next: str = Form(HOME, max_length=2048),
) -> HTMLResponse | RedirectResponse:
    services = services_of(request)
    target = safe_next(next)
    if open_mode(services):
        return see_other(target)
    try:
        token = sign_in(services, api_key)
    except AuthError as exc:
        return render(
            request,
            "login.html",
            {
                "next": target,
                "reason": None,
                "open_mode": False,
                "error": exc.message,
                "error_code": exc.code,
            },
            status=exc.status,
        )
    response = see_other(target)
    set_session(request, response, token)
    return response


@router.post("/ui/logout", dependencies=[Depends(check_csrf)])
def logout(request: Request) -> RedirectResponse:
    sign_out(request)
    response = see_other("/ui/login")
    clear_session(response)
    return response
