"""Retries: idempotent calls are repeated on 429/5xx and connection errors, others never.

The real app sits behind a small ASGI wrapper that answers the first N requests itself with an
error in Cairn's shape, as an overloaded server or proxy would.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from cairn.app import create_app
from cairn.client import ASGIAppTransport, AsyncCairn, Cairn, RateLimitError, ServerError
from cairn.services import Services


class Flaky:
    """Fails the first ``failures`` HTTP requests with ``status``, then passes them through."""

    def __init__(self, app: Any, failures: int, status: int = 503) -> None:
        self.app = app
        self.failures = failures
        self.status = status
        self.calls: list[str] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.calls.append(f"{scope['method']} {scope['path']}")
            if self.failures > 0:
                self.failures -= 1
                body = json.dumps(
                    {
                        "error": {
                            "code": "unavailable",
                            "message": "busy",
                            "details": None,
                            "request_id": "rid-1",
                        }
                    }
                ).encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": self.status,
                        "headers": [(b"content-type", b"application/json"), (b"retry-after", b"0")],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def client_for(flaky: Flaky, **options: Any) -> Cairn:
    return Cairn(transport=ASGIAppTransport(flaky), backoff=0.001, **options)


def test_get_is_retried_until_it_succeeds(services: Services) -> None:
    flaky = Flaky(create_app(services=services), failures=2)
    with client_for(flaky, max_retries=2) as cairn:
        assert cairn.subjects.list().total == 0
    assert len(flaky.calls) == 3


def test_retries_give_up_with_the_last_error(services: Services) -> None:
    flaky = Flaky(create_app(services=services), failures=5)
    with client_for(flaky, max_retries=2) as cairn, pytest.raises(ServerError) as info:
        cairn.version()
    assert (info.value.status, info.value.code, info.value.request_id) == (
        503,
        "unavailable",
        "rid-1",
    )
    assert len(flaky.calls) == 3


def test_429_is_retried_for_reads(services: Services) -> None:
    flaky = Flaky(create_app(services=services), failures=1, status=429)
    with client_for(flaky) as cairn:
        assert cairn.health().status == "ok"
    assert len(flaky.calls) == 2
    flaky = Flaky(create_app(services=services), failures=1, status=429)
    with client_for(flaky, max_retries=0) as cairn, pytest.raises(RateLimitError):
        cairn.health()


def test_post_without_idempotency_key_is_not_retried(services: Services) -> None:
    flaky = Flaky(create_app(services=services), failures=1)
    with client_for(flaky, max_retries=3) as cairn:
        with pytest.raises(ServerError):
            cairn.episodes.create("u", source="s", type="t", payload={})
        assert flaky.calls == ["POST /v1/episodes"]
        assert cairn.subjects.list().total == 0


def test_post_with_idempotency_key_is_retried(services: Services) -> None:
    flaky = Flaky(create_app(services=services), failures=1)
    with client_for(flaky, max_retries=3) as cairn:
        ep = cairn.episodes.create("u", source="s", type="t", payload={}, idempotency_key="k")
        assert cairn.timeline("u").episodes[0].id == ep.id
    assert flaky.calls[:2] == ["POST /v1/episodes", "POST /v1/episodes"]


def test_async_client_retries_too(services: Services) -> None:
    flaky = Flaky(create_app(services=services), failures=1, status=502)

    async def main() -> int:
        transport = httpx.ASGITransport(app=flaky)
        async with AsyncCairn(transport=transport, backoff=0.001) as cairn:
            return (await cairn.subjects.list()).total

    assert asyncio.run(main()) == 0
    assert len(flaky.calls) == 2
