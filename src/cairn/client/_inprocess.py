"""Run the SDK against the ASGI app inside this process: no server, no socket.

``httpx.ASGITransport`` already serves the async client. ``ASGIAppTransport`` is its sync twin:
it runs the app on an event loop in a helper thread (an anyio blocking portal) and hands each
request to it. ``LocalApp`` builds the app on the configured database and runs its lifespan
(startup hooks such as an in-process compile worker) for as long as a client uses it.
"""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

import httpx
from anyio.from_thread import BlockingPortal, start_blocking_portal

if TYPE_CHECKING:
    from cairn.config import Settings
    from cairn.services import Services

LOCAL_BASE_URL = "http://cairn.local"


class ASGIAppTransport(httpx.BaseTransport):
    """A sync httpx transport that calls an ASGI app in this process. Each response is read
    whole before it is returned (a streamed answer arrives in one piece).

    Example::

        from cairn.app import create_app
        client = Cairn(transport=ASGIAppTransport(create_app()))
    """

    def __init__(
        self, app: Any, *, lifespan: bool = False, raise_app_exceptions: bool = False
    ) -> None:
        self.app = app
        self._inner = httpx.ASGITransport(app=app, raise_app_exceptions=raise_app_exceptions)
        self._run_lifespan = lifespan
        self._portal_cm: AbstractContextManager[BlockingPortal] | None = None
        self._portal: BlockingPortal | None = None
        self._lifespan_cm: AbstractContextManager[Any] | None = None
        self._lock = threading.Lock()  # two threads' first requests start one loop, not two

    @property
    def portal(self) -> BlockingPortal:
        """The event loop thread the app runs on (started on first use)."""
        with self._lock:
            return self._portal if self._portal is not None else self._start()

    def _start(self) -> BlockingPortal:
        if self._portal is None:
            self._portal_cm = start_blocking_portal()
            self._portal = self._portal_cm.__enter__()
            if self._run_lifespan:
                # Startup hooks (e.g. an in-process compile worker) run on the portal's loop,
                # as under a server, until close().
                self._lifespan_cm = self._portal.wrap_async_context_manager(
                    self.app.router.lifespan_context(self.app)
                )
                self._lifespan_cm.__enter__()
        return self._portal

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        content = request.read()

        async def forward() -> tuple[int, list[tuple[bytes, bytes]], bytes]:
            inner = httpx.Request(
                request.method, request.url, headers=request.headers, content=content
            )
            response = await self._inner.handle_async_request(inner)
            body = await response.aread()
            return response.status_code, response.headers.raw, body

        status, headers, body = self.portal.call(forward)
        return httpx.Response(status, headers=headers, content=body, request=request)

    def close(self) -> None:
        """Run the app's shutdown hooks (if this transport started them), stop the loop."""
        if self._lifespan_cm is not None:
            lifespan, self._lifespan_cm = self._lifespan_cm, None
            lifespan.__exit__(None, None, None)
        if self._portal_cm is not None:
            self._portal_cm.__exit__(None, None, None)
            self._portal_cm = None
            self._portal = None


class LocalApp:
    """The Cairn app on the configured database, owned by one in-process client."""

    def __init__(self, settings: Settings | None = None, services: Services | None = None) -> None:
        from cairn.app import create_app
        from cairn.config import Settings
        from cairn.services import Services

        self.own_services = services is None
        # CAIRN_API_KEY is the key this client sends: not registered here (a server's start
        # does that), so an unknown one is refused as over HTTP.
        self.services = services or Services.from_settings(
            settings or Settings(), register_key=False
        )
        self.app = create_app(services=self.services)

    def lifespan(self) -> Any:
        """The app's lifespan context (startup and shutdown hooks)."""
        return self.app.router.lifespan_context(self.app)

    def close(self) -> None:
        if self.own_services:
            self.services.close()
