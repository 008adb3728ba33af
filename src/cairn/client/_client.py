"""``Cairn`` (sync) and ``AsyncCairn``: the typed HTTP clients.

Both send the same ``Call`` descriptions; they differ only in how the request travels. Pass
``base_url`` (or set ``CAIRN_URL``) to talk to a server, ``transport=`` to route requests
anywhere httpx can (``httpx.ASGITransport(app)`` for the async client,
``ASGIAppTransport(app)`` for the sync one), or use ``Cairn.local()`` to run the app on the
configured database inside this process.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import weakref
from collections.abc import AsyncIterator, Iterable, Iterator
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

import httpx

from cairn.client._base import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT,
    Call,
    RetryPolicy,
    check_call,
    default_headers,
    parse_response,
    resolve_key,
    resolve_url,
)
from cairn.client._context import AsyncScopes, Scopes, context_call
from cairn.client._episodes import (
    AsyncEpisodes,
    AsyncSubjects,
    Episodes,
    Subjects,
    create_batch_call,
    timeline_call,
)
from cairn.client._errors import APIConnectionError, APITimeoutError, error_from_response
from cairn.client._feature_models import CompileResult, ContextBundle
from cairn.client._inprocess import LOCAL_BASE_URL, ASGIAppTransport, LocalApp
from cairn.client._items import AsyncItems, Items
from cairn.client._ladders import AsyncLadders, AsyncRuns, Ladders, Runs
from cairn.client._lifecycle import merge_compiles, turn_episodes
from cairn.client._memories import AsyncMemories, Memories
from cairn.client._models import Health, Timeline, Version
from cairn.client._slates import AsyncSlates, Slates
from cairn.client._templates import AsyncTemplates, Templates

if TYPE_CHECKING:
    from cairn.config import Settings
    from cairn.services import Services

T = TypeVar("T")


def _connection_error(exc: httpx.TransportError, call: Call[Any]) -> APIConnectionError:
    kind = APITimeoutError if isinstance(exc, httpx.TimeoutException) else APIConnectionError
    return kind(f"{call.method} {call.path}: {exc.__class__.__name__}: {exc}")


def close_at_exit(client: Cairn) -> None:
    """Close an in-process client left open when the interpreter exits. Its app runs on a
    worker thread that the interpreter joins before ``atexit`` handlers run, so an unclosed
    ``Cairn.local()`` (a module-level store, say) would hang the exit: the hook is registered
    where ``concurrent.futures`` registers its own, and runs first. Held weakly."""
    ref = weakref.ref(client)

    def close() -> None:
        alive = ref()
        if alive is not None and alive._local is not None:
            alive.close()

    with contextlib.suppress(RuntimeError):  # already shutting down: nothing to hang
        threading._register_atexit(close)  # type: ignore[attr-defined]


class Cairn:
    """Synchronous client. Use as a context manager, or call ``close()``.

    Example::

        with Cairn("http://127.0.0.1:8100", api_key="...") as cairn:
            cairn.episodes.create("user-1", source="chat", type="message",
                                  payload={"text": "I prefer tea"})
            print(cairn.timeline("user-1").episodes)
    """

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        transport: httpx.BaseTransport | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        backoff: float = 0.5,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.base_url = resolve_url(base_url or (LOCAL_BASE_URL if transport else None))
        self.api_key = resolve_key(api_key)
        self.retry = RetryPolicy(max_retries, backoff)
        self._http = httpx.Client(
            base_url=self.base_url,
            transport=transport,
            timeout=timeout,
            headers=default_headers(self.api_key, headers),
        )
        self._local: LocalApp | None = None
        self.episodes = Episodes(self)
        self.subjects = Subjects(self)
        self.templates = Templates(self)
        self.memories = Memories(self)
        self.scopes = Scopes(self)
        self.slates = Slates(self)
        self.ladders = Ladders(self)
        self.runs = Runs(self)
        self.items = Items(self)

    @classmethod
    def local(
        cls,
        settings: Settings | None = None,
        *,
        services: Services | None = None,
        api_key: str | None = None,
        **options: Any,
    ) -> Cairn:
        """A client of the Cairn app running in this process on ``settings``' database.

        The key defaults to ``settings.api_key``; with no key anywhere the store must be in
        open mode (no keys created), exactly as a loopback server would be.
        """
        app = LocalApp(settings, services)
        transport = ASGIAppTransport(app.app, lifespan=True)
        try:
            app_key = api_key if api_key is not None else (app.services.settings.api_key or None)
            client = cls(LOCAL_BASE_URL, api_key=app_key or "", transport=transport, **options)
            client._local = app
            transport.portal  # noqa: B018 - start the app now, so startup errors surface here
        except BaseException:
            transport.close()
            app.close()
            raise
        close_at_exit(client)
        return client

    def _send(self, call: Call[T]) -> T:
        check_call(call)
        attempt = 0
        while True:
            try:
                response = self._http.request(
                    call.method,
                    call.path,
                    params=call.params,
                    json=call.json,
                    headers=call.headers or None,
                )
            except httpx.TransportError as exc:
                if not self.retry.should_retry_error(call, attempt):
                    raise _connection_error(exc, call) from exc
                time.sleep(self.retry.delay(attempt))
                attempt += 1
                continue
            if self.retry.should_retry_status(call, response.status_code, attempt):
                time.sleep(self.retry.delay(attempt, response))
                attempt += 1
                continue
            return parse_response(call, response)

    def _stream_lines(self, call: Call[Any]) -> Iterator[str]:
        """The lines of a streamed answer (server-sent events); sent once, never retried."""
        check_call(call)
        try:
            with self._http.stream(
                call.method,
                call.path,
                params=call.params,
                json=call.json,
                headers=call.headers or None,
            ) as response:
                if response.status_code >= 400:
                    response.read()
                    raise error_from_response(response)
                yield from response.iter_lines()
        except httpx.TransportError as exc:
            raise _connection_error(exc, call) from exc

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        idempotent: bool | None = None,
    ) -> Any:
        """Call any endpoint and get its JSON back (for endpoints newer than this SDK)."""
        return self._send(Call(method, path, Any, params=params, json=json, idempotent=idempotent))

    def health(self) -> Health:
        """``GET /healthz``: the process is up."""
        return self._send(Call("GET", "/healthz", Health))

    def ready(self) -> Health:
        """``GET /readyz``: the database answers (a ``ServerError`` 503 when it does not)."""
        return self._send(Call("GET", "/readyz", Health))

    def version(self) -> Version:
        """``GET /v1/version``."""
        return self._send(Call("GET", "/v1/version", Version))

    def timeline(
        self,
        subject_id: str,
        *,
        limit: int | None = None,
        offset: int | None = None,
        newest_first: bool = False,
    ) -> Timeline:
        """Episodes and memories of a subject in time order, each paged by limit/offset
        (``newest_first``: the window from the newest end, ``offset`` counting back)."""
        return self._send(timeline_call(subject_id, limit, offset, newest_first))

    def remember(
        self,
        subject_id: str,
        messages: Iterable[dict[str, Any] | str],
        *,
        session_id: str | None = None,
    ) -> CompileResult:
        """Record messages (``{"role", "content"}`` or a user's text) as episodes of the
        subject, compile them, and return what was learnt (the memories created)."""
        episodes = turn_episodes(subject_id, messages, session_id)
        for start in range(0, len(episodes), 100):
            self._send(create_batch_call(episodes[start : start + 100]))
        results = [self.memories.compile(subject_id)]
        while results[-1].has_more:
            results.append(self.memories.compile(subject_id))
        return merge_compiles(subject_id, results)

    def context(
        self,
        subject_id: str,
        task: str,
        *,
        max_tokens: int | None = None,
        session_id: str | None = None,
    ) -> ContextBundle:
        """Ranked, token-bounded context for a subject and a task (``POST /v1/context``)."""
        return self._send(context_call(subject_id, task, max_tokens, session_id))

    def close(self) -> None:
        """Close the connection pool (and the in-process app, if this client owns one)."""
        self._http.close()  # also closes the transport: an ASGIAppTransport stops its loop
        if self._local is not None:
            self._local.close()
            self._local = None

    def __enter__(self) -> Cairn:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AsyncCairn:
    """Asynchronous client, the twin of ``Cairn``. Use ``async with`` or ``await aclose()``.

    Example::

        async with AsyncCairn.local() as cairn:
            await cairn.episodes.create("user-1", source="chat", type="message",
                                        payload={"text": "I prefer tea"})
    """

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        backoff: float = 0.5,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.base_url = resolve_url(base_url or (LOCAL_BASE_URL if transport else None))
        self.api_key = resolve_key(api_key)
        self.retry = RetryPolicy(max_retries, backoff)
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            transport=transport,
            timeout=timeout,
            headers=default_headers(self.api_key, headers),
        )
        self._local: LocalApp | None = None
        self._lifespan: Any = None
        self._started = False
        self.episodes = AsyncEpisodes(self)
        self.subjects = AsyncSubjects(self)
        self.templates = AsyncTemplates(self)
        self.memories = AsyncMemories(self)
        self.scopes = AsyncScopes(self)
        self.slates = AsyncSlates(self)
        self.ladders = AsyncLadders(self)
        self.runs = AsyncRuns(self)
        self.items = AsyncItems(self)

    @classmethod
    def local(
        cls,
        settings: Settings | None = None,
        *,
        services: Services | None = None,
        api_key: str | None = None,
        **options: Any,
    ) -> AsyncCairn:
        """An async client of the Cairn app running in this process (see ``Cairn.local``).
        The app's startup hooks run on first use (or ``async with``)."""
        app = LocalApp(settings, services)
        app_key = api_key if api_key is not None else (app.services.settings.api_key or None)
        transport = httpx.ASGITransport(app=app.app, raise_app_exceptions=False)
        client = cls(LOCAL_BASE_URL, api_key=app_key or "", transport=transport, **options)
        client._local = app
        return client

    async def _start(self) -> None:
        if self._local is not None and not self._started:
            self._started = True
            self._lifespan = self._local.lifespan()
            await self._lifespan.__aenter__()

    async def _send(self, call: Call[T]) -> T:
        check_call(call)
        await self._start()
        attempt = 0
        while True:
            try:
                response = await self._http.request(
                    call.method,
                    call.path,
                    params=call.params,
                    json=call.json,
                    headers=call.headers or None,
                )
            except httpx.TransportError as exc:
                if not self.retry.should_retry_error(call, attempt):
                    raise _connection_error(exc, call) from exc
                await asyncio.sleep(self.retry.delay(attempt))
                attempt += 1
                continue
            if self.retry.should_retry_status(call, response.status_code, attempt):
                await asyncio.sleep(self.retry.delay(attempt, response))
                attempt += 1
                continue
            return parse_response(call, response)

    async def _stream_lines(self, call: Call[Any]) -> AsyncIterator[str]:
        """The lines of a streamed answer (server-sent events); sent once, never retried."""
        check_call(call)
        await self._start()
        try:
            async with self._http.stream(
                call.method,
                call.path,
                params=call.params,
                json=call.json,
                headers=call.headers or None,
            ) as response:
                if response.status_code >= 400:
                    await response.aread()
                    raise error_from_response(response)
                async for line in response.aiter_lines():
                    yield line
        except httpx.TransportError as exc:
            raise _connection_error(exc, call) from exc

    async def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        idempotent: bool | None = None,
    ) -> Any:
        """Call any endpoint and get its JSON back (for endpoints newer than this SDK)."""
        return await self._send(
            Call(method, path, Any, params=params, json=json, idempotent=idempotent)
        )

    async def health(self) -> Health:
        """``GET /healthz``: the process is up."""
        return await self._send(Call("GET", "/healthz", Health))

    async def ready(self) -> Health:
        """``GET /readyz``: the database answers."""
        return await self._send(Call("GET", "/readyz", Health))

    async def version(self) -> Version:
        """``GET /v1/version``."""
        return await self._send(Call("GET", "/v1/version", Version))

    async def timeline(
        self,
        subject_id: str,
        *,
        limit: int | None = None,
        offset: int | None = None,
        newest_first: bool = False,
    ) -> Timeline:
        """Episodes and memories of a subject in time order, each paged by limit/offset
        (``newest_first``: the window from the newest end, ``offset`` counting back)."""
        return await self._send(timeline_call(subject_id, limit, offset, newest_first))

    async def remember(
        self,
        subject_id: str,
        messages: Iterable[dict[str, Any] | str],
        *,
        session_id: str | None = None,
    ) -> CompileResult:
        """Record messages as episodes of the subject, compile them, and return what was
        learnt (see ``Cairn.remember``)."""
        episodes = turn_episodes(subject_id, messages, session_id)
        for start in range(0, len(episodes), 100):
            await self._send(create_batch_call(episodes[start : start + 100]))
        results = [await self.memories.compile(subject_id)]
        while results[-1].has_more:
            results.append(await self.memories.compile(subject_id))
        return merge_compiles(subject_id, results)

    async def context(
        self,
        subject_id: str,
        task: str,
        *,
        max_tokens: int | None = None,
        session_id: str | None = None,
    ) -> ContextBundle:
        """Ranked, token-bounded context for a subject and a task (``POST /v1/context``)."""
        return await self._send(context_call(subject_id, task, max_tokens, session_id))

    async def aclose(self) -> None:
        """Close the connection pool (and the in-process app, if this client owns one)."""
        await self._http.aclose()
        if self._lifespan is not None:
            lifespan, self._lifespan = self._lifespan, None
            await lifespan.__aexit__(None, None, None)
        if self._local is not None:
            self._local.close()
            self._local = None

    async def __aenter__(self) -> AsyncCairn:
        await self._start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
