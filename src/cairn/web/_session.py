"""Who is looking: the signed-in viewer's tenant, and the CSRF check of every form post.

Signing in with an API key opens a server-side session: the browser gets an opaque random
token in an HTTP-only, same-site cookie (never the key itself, so a leaked cookie is not a
key), and the server keeps only the token's digest. A session ends when it expires
(``CAIRN_SESSION_TTL_SECONDS``), at sign-out, or as soon as its key is revoked. With no key
configured at all (open mode, loopback only) no sign-in is needed and everything belongs to the
``default`` tenant, as for the API.
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass

from fastapi import Request, Response

from cairn.core.tenants import DEFAULT_TENANT
from cairn.errors import CairnError, InvalidApiKey
from cairn.http.auth import services_of, tenant_for_key
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
        token = request.cookies.get(SESSION_COOKIE)
        if not token:
            raise SignInRequired()
        session = services.store.sessions.resolve(token)
        if session is None:
            raise SignInRequired("Your session has ended or its key was revoked; sign in again.")
        viewer = Viewer(session.tenant_id, open_mode=False, key_prefix=session.key_prefix)
    request.state.viewer = viewer
    request.scope.setdefault("state", {})["tenant"] = viewer.tenant
    return viewer


def sign_in(services: Services, key: str) -> str:
    """A new session token for ``key``; raises ``InvalidApiKey`` / ``MissingApiKey`` like
    the API does for the key."""
    tenant_for_key(services, key.strip() or None)
    made = services.store.sessions.create(key.strip(), services.settings.session_ttl_seconds)
    if made is None:  # revoked between the two reads
        raise InvalidApiKey("the API key is unknown or revoked")
    return made[0]


def sign_out(request: Request) -> None:
    token = request.cookies.get(SESSION_COOKIE)
    if token:
        services_of(request).store.sessions.revoke(token)


def set_session(request: Request, response: Response, token: str) -> None:
    response.set_cookie(
        SESSION_COOKIE,
        token,
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
