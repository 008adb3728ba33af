"""Fixtures for ladders: ladder directories, the real app on a loopback port, a fake model server.

The Cairn server and the fake OpenAI-compatible model server are real HTTP servers (uvicorn in
a thread, on a free port of 127.0.0.1), stopped when the test ends.
"""

from __future__ import annotations

import json
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from cairn.app import create_app
from cairn.services import Services
from tests.conftest import make_settings

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "ladders"


@contextmanager
def serve(app: Any) -> Iterator[str]:
    """Serve an ASGI app on a free loopback port; yields its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", access_log=False, ws="none", lifespan="on")
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        sock.close()


@pytest.fixture
def ladders_dir(tmp_path: Path) -> Path:
    """A ladders directory holding a copy of the shipped examples."""
    d = tmp_path / "ladders"
    shutil.copytree(EXAMPLES, d)
    return d


def write_ladder(directory: Path, name: str, text: str) -> Path:
    path = directory / f"{name}.yaml"
    path.write_text(text)
    return path


@dataclass
class Cairn:
    """A running Cairn server with a key (auth required), and its services."""

    url: str
    services: Services
    key: str
    other_key: str

    def base(self, ladder: str) -> str:
        return f"{self.url}/v1/local/{ladder}"


@contextmanager
def running_cairn(tmp_path: Path, ladders: Path, **settings: Any) -> Iterator[Cairn]:
    services = Services.from_settings(make_settings(tmp_path, ladders_dir=ladders, **settings))
    key, _ = services.store.keys.create("tenant-a")
    other, _ = services.store.keys.create("tenant-b")
    try:
        with serve(create_app(services=services)) as url:
            yield Cairn(url, services, key, other)
    finally:
        services.close()


@pytest.fixture
def cairn(tmp_path: Path, ladders_dir: Path) -> Iterator[Cairn]:
    """Cairn on SQLite serving the example ladders, with keys for tenants a and b."""
    with running_cairn(tmp_path, ladders_dir) as c:
        yield c


# --------------------------------------------------------------------------- fake model server


@dataclass
class FakeModel:
    """Behaviour of the fake OpenAI-compatible server, and what it received."""

    reply: Callable[[dict[str, Any]], str] = lambda body: "fake reply"
    fail_first: int = 0  # answer 503 to this many requests first
    fail_status: int = 503
    echo_auth: bool = False  # the failure's message repeats the Authorization header
    delay_s: float = 0.0
    piece_delay_s: float = 0.0  # a streamed reply's second half comes this much later
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)


def fake_openai_app(model: FakeModel) -> FastAPI:
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Any:
        body = await request.json()
        model.requests.append(body)
        model.headers.append(dict(request.headers))
        if model.delay_s:
            import asyncio

            await asyncio.sleep(model.delay_s)
        if model.fail_first > 0:
            model.fail_first -= 1
            sent = (request.headers.get("authorization"), request.headers.get("x-org"))
            said = f"bad key: {sent[0]}, org {sent[1]}" if model.echo_auth else ""
            message = said or "overloaded"
            return JSONResponse({"error": {"message": message}}, status_code=model.fail_status)
        text = model.reply(body)
        usage = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
        if not body.get("stream"):
            return {
                "id": "cmpl-1",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                    }
                ],
                "usage": usage,
            }

        def events() -> Iterator[bytes]:
            for i, piece in enumerate([text[: len(text) // 2], text[len(text) // 2 :]]):
                if i and model.piece_delay_s:
                    time.sleep(model.piece_delay_s)
                chunk = {
                    "id": "c",
                    "object": "chat.completion.chunk",
                    "model": body["model"],
                    "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}],
                }
                yield f"data: {json.dumps(chunk)}\n\n".encode()
            yield f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n".encode()
            yield b"data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    return app


@pytest.fixture
def fake_model() -> Iterator[tuple[FakeModel, str]]:
    """A fake OpenAI-compatible server; yields its behaviour and its base URL (…/v1)."""
    model = FakeModel()
    with serve(fake_openai_app(model)) as url:
        yield model, f"{url}/v1"
