"""Who is looking: the signed-in key's tenant, and the CSRF check of every form post.

The API key itself is the session: it is kept in an HTTP-only, same-site cookie and resolved to
its tenant on every request through the same function the API uses, so revoking a key signs
its browser sessions out at once. With no key configured at all (open mode, loopback only) no
sign-in is needed and everything belongs to the ``default`` tenant, as for the API.
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass

from fastapi import Request, Response

from cairn.api.auth import services_of, tenant_for_key
from cairn.core.tenants import DEFAULT_TENANT
from cairn.errors import AuthError, CairnError
from cairn.services import Services

SESSION_COOKIE = "cairn_session"
CSRF_COOKIE = "cairn_csrf"
CSRF_FIELD = "csrf"
COOKIE_PATH = "/ui"


class SignInRequired(Exception):
    """Raised by a page that needs a signed-in viewer; the router redirects to the sign-in page."""

    def __init__(self, reason: str = "") -> None:
        super().__init__(reason)
        self.reason = reason


class CsrfFailed(CairnError):
    code = "csrf_failed"
    status = 403


@dataclass(frozen=True, slots=True)
class Viewer:
    """The tenant a page shows, and how the viewer got it."""

    tenant: str
    open_mode: bool
    key_prefix: str | None = None


def open_mode(services: Services) -> bool:
    return not services.auth_required()


def current_viewer(request: Request) -> Viewer:
    """FastAPI dependency of every page: the viewer, or ``SignInRequired``."""
    services = services_of(request)
    if open_mode(services):
        viewer = Viewer(DEFAULT_TENANT, open_mode=True)
    else:
        key = request.cookies.get(SESSION_COOKIE)
        if not key:
            raise SignInRequired()
        try:
            tenant = tenant_for_key(services, key)
        except AuthError:
            raise SignInRequired("Your API key is no longer valid; sign in again.") from None
        viewer = Viewer(tenant, open_mode=False, key_prefix=key[:12])
    request.state.viewer = viewer
    request.scope.setdefault("state", {})["tenant"] = viewer.tenant
    return viewer


def sign_in(services: Services, key: str) -> str:
    """The tenant of ``key``; raises ``InvalidApiKey`` / ``MissingApiKey`` like the API."""
    return tenant_for_key(services, key.strip() or None)


def set_session(request: Request, response: Response, key: str) -> None:
    response.set_cookie(
        SESSION_COOKIE,
        key.strip(),
        path=COOKIE_PATH,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def clear_session(response: Response) -> None:
    response.delete_cookie(SESSION_COOKIE, path=COOKIE_PATH, httponly=True, samesite="strict")


def csrf_token(request: Request) -> str:
    """The viewer's CSRF token (double-submit: a cookie and a hidden form field must match)."""
    token: str | None = getattr(request.state, "csrf", None)
    if token is None:
        token = request.cookies.get(CSRF_COOKIE) or secrets.token_urlsafe(24)
        request.state.csrf = token
    return token


def persist_csrf(request: Request, response: Response) -> None:
    """Set the CSRF cookie when this request made a new token."""
    token = getattr(request.state, "csrf", None)
    if token and request.cookies.get(CSRF_COOKIE) != token:
        response.set_cookie(
            CSRF_COOKIE,
            token,
            path=COOKIE_PATH,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )


def _same_token(sent: str, cookie: str) -> bool:
    # compare_digest refuses non-ASCII str; a token with any other character (a tampered form
    # or cookie) must fail the check, not the request. Bytes compare any text in constant time.
    def raw(text: str) -> bytes:
        return text.encode("utf-8", "surrogatepass")

    return hmac.compare_digest(raw(sent), raw(cookie))


async def check_csrf(request: Request) -> None:
    """FastAPI dependency of every form post: the field must equal the cookie.

    Same-site cookies already stop most cross-site posts; the token also covers open mode,
    where no session cookie exists at all.
    """
    form = await request.form()
    sent = form.get(CSRF_FIELD)
    cookie = request.cookies.get(CSRF_COOKIE)
    if not isinstance(sent, str) or not cookie or not _same_token(sent, cookie):
        raise CsrfFailed(
            "the form is out of date or was not sent from this site; reload the page and retry"
        )
