"""The SDK over real HTTP: a uvicorn server on a free loopback port, started and stopped here."""

from __future__ import annotations

import asyncio

import pytest

from cairn.app import create_app
from cairn.client import APIConnectionError, AsyncCairn, AuthenticationError, Cairn
from cairn.config import Settings
from cairn.services import Services
from tests.client.conftest import free_port, live_server
from tests.client.test_async import _every_method


def test_sync_and_async_clients_against_a_live_server(sdk_settings: Settings) -> None:
    services = Services.from_settings(sdk_settings)
    key, _ = services.store.keys.create("acme")
    try:
        with live_server(create_app(services=services)) as url:
            with Cairn(url, api_key=key) as cairn:
                ep = cairn.episodes.create(
                    "user-1",
                    source="chat",
                    type="message",
                    session_id="s",
                    payload={"text": "Call me Ada"},
                )
                assert cairn.timeline("user-1").episodes[0].id == ep.id
                assert "Ada" in cairn.context("user-1", "name?", session_id="s").assembled_context
                assert cairn.subjects.delete("user-1").episodes_deleted == 1
            with Cairn(url, api_key="wrong") as stranger:
                with pytest.raises(AuthenticationError) as info:
                    stranger.subjects.list()
                assert info.value.code == "invalid_api_key" and info.value.request_id

            async def run_async() -> None:
                async with AsyncCairn(url, api_key=key) as c:
                    await _every_method(c)

            asyncio.run(run_async())
    finally:
        services.close()


def test_connection_refused_is_an_api_connection_error() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    with Cairn(url, max_retries=1, backoff=0.01) as cairn, pytest.raises(APIConnectionError):
        cairn.health()
