"""Integration fixtures: Cairn embedded (in-process, on each backend) or behind a real server,
and an offline model for the OpenAI Agents SDK."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cairn.app import create_app
from cairn.client import AsyncCairn, Cairn
from cairn.config import Settings
from cairn.services import Services
from tests.client.conftest import live_server
from tests.conftest import make_settings


@pytest.fixture
def backend_settings(db_url: str, tmp_path: Path) -> Settings:
    """Settings on each backend (parametrized by ``backend``), lexical search only."""
    return make_settings(tmp_path, database_url=db_url)


@pytest.fixture
def server_url(backend_settings: Settings) -> Iterator[str]:
    """A real uvicorn server of the app on each backend."""
    services = Services.from_settings(backend_settings)
    try:
        with live_server(create_app(services=services)) as url:
            yield url
    finally:
        services.close()


@pytest.fixture(params=["embedded", "server"])
def mode(request: pytest.FixtureRequest) -> str:
    """How the adapter reaches Cairn: in this process, or over HTTP."""
    return str(request.param)


@pytest.fixture
def connect(
    mode: str, backend_settings: Settings, request: pytest.FixtureRequest
) -> Callable[[], AsyncCairn]:
    """Makes an async SDK client, in-process or of a live server, on each backend. Call it
    inside the event loop that uses it (``asyncio.run``)."""
    if mode == "embedded":
        return lambda: AsyncCairn.local(backend_settings)
    url = request.getfixturevalue("server_url")
    return lambda: AsyncCairn(url, api_key="")


@pytest.fixture
def connect_sync(
    mode: str, backend_settings: Settings, request: pytest.FixtureRequest
) -> Iterator[Callable[[], Cairn]]:
    """Makes sync SDK clients, in-process or of a live server, on each backend; closes them."""
    made: list[Cairn] = []

    def make() -> Cairn:
        if mode == "embedded":
            made.append(Cairn.local(backend_settings))
        else:
            made.append(Cairn(request.getfixturevalue("server_url"), api_key=""))
        return made[-1]

    yield make
    for client in made:
        client.close()
