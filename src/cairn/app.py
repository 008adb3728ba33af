"""The server application, assembled above its two faces: the HTTP API (``cairn.api``) and the
web inspector (``cairn.web``), on one ``Services``. ``create_app`` builds it; ``cairn serve``,
``cairn.asgi`` and the SDK's in-process transport all start from here.

Nothing below this module imports it (the layers contract in pyproject.toml checks that), so
the API and the inspector never import each other: what they share lives in ``cairn.http``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import os
import signal
import sys
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from cairn import __version__
from cairn.api.access import AccessMiddleware
from cairn.api.allow import AllowMiddleware, RouteTable
from cairn.api.docs import install_docs
from cairn.api.errors import install_error_handlers
from cairn.api.middleware import (
    BodyLimitMiddleware,
    RejectLoneSurrogateMiddleware,
    RejectNulMiddleware,
    RequestContextMiddleware,
)
from cairn.api.openapi import install_openapi
from cairn.api.routes import episodes, health, subjects
from cairn.api.routes.context import router as context_router
from cairn.api.routes.items import router as items_router
from cairn.api.routes.ladder_files import router as ladder_files_router
from cairn.api.routes.ladders import router as ladders_router
from cairn.api.routes.lifecycle import router as lifecycle_router
from cairn.api.routes.memories import router as memories_router
from cairn.api.routes.memories import scopes_router as memory_scopes_router
from cairn.api.routes.slates import router as slates_router
from cairn.api.routes.templates import router as templates_router
from cairn.api.routes.transfer import router as transfer_router
from cairn.api.routes.unsupported import router as unsupported_router
from cairn.config import Settings
from cairn.services import Services
from cairn.web import install_web

# The event loop shares the interpreter with compile and embedding threads (CPU-bound Python).
# With CPython's default 5 ms switch interval a request waits up to several intervals for the
# GIL; 1 ms keeps single requests fast while a big compile runs (tests/api/test_event_loop.py).
SERVER_SWITCH_INTERVAL_S = 0.001


def prepare_server_process() -> None:
    """Process-wide settings of a server process (called by ``cairn serve`` and the ASGI
    entry point, never by the library)."""
    sys.setswitchinterval(SERVER_SWITCH_INTERVAL_S)
    if tune_malloc():
        start_heap_trimmer()


# glibc ``mallopt`` parameters.
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8


def _linux_libc() -> ctypes.CDLL:
    """The C library of a Linux process (OSError elsewhere)."""
    name = ctypes.util.find_library("c")
    if not sys.platform.startswith("linux") or not name:
        raise OSError("not Linux, or no C library found")
    return ctypes.CDLL(name)


# Set by ``cairn serve --workers N`` to its own pid: the processes it starts stop with it.
SERVE_PARENT_ENV = "CAIRN_SERVE_PARENT"
_PR_SET_PDEATHSIG = 1


def stop_with_parent() -> bool:
    """In a process of ``cairn serve --workers N``, ask Linux for SIGTERM when that command's
    process dies, however it dies (``kill -9`` included): its processes would otherwise go on
    serving the port with nobody to stop them, and a new ``cairn serve`` could not bind it.
    Not in a process started some other way (``uvicorn cairn.asgi:app``). Returns whether
    it was asked."""
    parent = os.environ.get(SERVE_PARENT_ENV)
    if not parent or parent != str(os.getppid()):
        return False
    try:
        asked = _linux_libc().prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False
    if asked and str(os.getppid()) != parent:  # it died before the request: stop now
        os.kill(os.getpid(), signal.SIGTERM)
    return asked


def tune_malloc() -> bool:
    """Make glibc's malloc give memory back (Linux with glibc; elsewhere nothing happens).

    By default every thread that allocates gets its own heap (up to 8 per core), and the size
    from which a block is mapped on its own (and unmapped when freed) grows up to 32 MB as
    large blocks are freed, so the embedder's and the vector lane's numpy buffers end up in
    heaps that never shrink. Two heaps and a fixed 1 MiB threshold: about 120 MB less RSS after
    the scale benchmark with the default embedder (docs/benchmarks.md). Returns whether both
    settings took."""
    try:
        mallopt = _linux_libc().mallopt
    except (OSError, AttributeError):  # not Linux's glibc
        return False
    ok = mallopt(_M_ARENA_MAX, 2) == 1
    return bool(mallopt(_M_MMAP_THRESHOLD, 1 << 20) == 1 and ok)


HEAP_TRIM_INTERVAL_S = 10.0
HEAP_TRIMMER = "cairn-heap-trim"


def start_heap_trimmer(interval_s: float = HEAP_TRIM_INTERVAL_S) -> threading.Thread | None:
    """A daemon thread that hands the free pages inside glibc's heaps back to the system every
    ``interval_s`` (``malloc_trim``). ``free`` only returns the top of a heap: a compile's
    transient rows and strings leave free pages between live blocks that stay in the RSS
    (5-10 MB after the scale benchmark). One trim takes about a millisecond. Started once per
    process (the thread is found by its name); None where there is no glibc."""
    running = next((t for t in threading.enumerate() if t.name == HEAP_TRIMMER), None)
    if running is not None:
        return running
    try:
        trim = _linux_libc().malloc_trim
    except (OSError, AttributeError):  # not Linux's glibc
        return None

    def run() -> None:
        while True:
            time.sleep(interval_s)
            trim(0)

    trimmer = threading.Thread(target=run, name=HEAP_TRIMMER, daemon=True)
    trimmer.start()
    return trimmer


def settle_server_heap() -> None:
    """Move everything a server process built at start-up (modules, services, the app: some
    150,000 objects) out of the garbage collector's sight, once the app is built.

    A full collection walks every tracked object while holding the GIL, so with the start-up
    heap in view each one stopped every request for 80-280 ms on a busy machine (the tail of
    single ingests during a big compile). Those objects live as long as the process anyway;
    after ``gc.freeze`` a full collection walks only what requests and compiles made."""
    gc.collect()
    gc.freeze()


ROUTERS = [
    health.router,
    episodes.router,
    subjects.router,
    templates_router,
    slates_router,
    context_router,
    ladders_router,
    ladder_files_router,
    memories_router,
    memory_scopes_router,
    lifecycle_router,  # after memories_router: /v1/memories/search is not an id
    transfer_router,
    items_router,
    unsupported_router,
]


def create_app(settings: Settings | None = None, services: Services | None = None) -> FastAPI:
    """Build the app. Pass ``services`` to share them (tests, an in-process client);
    otherwise they are built from ``settings`` and closed with the app."""
    own_services = services is None
    if services is None:
        services = Services.from_settings(settings or Settings())

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        for start in services.on_start:
            start()
        try:
            yield
        finally:
            for stop in reversed(services.on_stop):
                stop()
            if own_services:
                services.close()

    app = FastAPI(
        title="Cairn",
        version=__version__,
        description="A memory runtime for AI agents.",
        lifespan=lifespan,
        docs_url=None,  # served by install_docs, from a package instead of a CDN
        redoc_url=None,
        # ``/v1/subjects/`` (an empty id) is a 404 in the API's error shape, not a redirect
        # to ``/v1/subjects``, which a client following it would list or act on instead
        # (pages of the inspector are still redirected: ``cairn.api.errors``).
        redirect_slashes=False,
    )
    app.state.services = services
    app.state.metrics = services.metrics
    install_error_handlers(app)
    for router in ROUTERS:
        app.include_router(router)
    install_web(app)
    install_openapi(app)
    install_docs(app)
    app.add_middleware(RejectLoneSurrogateMiddleware)
    app.add_middleware(RejectNulMiddleware)
    routes = RouteTable(lambda: list(app.routes))
    app.add_middleware(AllowMiddleware, table=routes)
    app.add_middleware(BodyLimitMiddleware, max_bytes=services.settings.max_body_bytes)
    # Outside the body's checks, its size included: a peer or host refused, or a body
    # without a key, is answered before them, and every answer gets the security headers.
    app.add_middleware(AccessMiddleware, services=services)
    app.add_middleware(
        RequestContextMiddleware,
        metrics=app.state.metrics,
        json_logs=services.settings.log_json,
        gate=services.requests,
        routes=routes,
    )
    return app
