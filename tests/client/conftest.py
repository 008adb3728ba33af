"""SDK fixtures: settings with a ladder (slates + an offline scripted model), the in-process
client, and a real uvicorn server on a free loopback port."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from cairn.client import Cairn
from cairn.config import Settings
from tests.conftest import make_settings

NOTES_LADDER = """\
slates:
  - title: Memory
    folders:
      - name: facts
        tokenLimit: 12
        evictionPolicy: FIFO
        files:
          - { name: core.md, init: blank }
          - { name: people.json, init: blank }
providers:
  p: {kind: scripted, default: "echo!"}
models: {"*": p}
"""


@pytest.fixture
def sdk_settings(tmp_path: Path) -> Settings:
    """SQLite in the test's directory, open mode, one ladder ``notes``."""
    ladders = tmp_path / "ladders"
    ladders.mkdir()
    (ladders / "notes.yaml").write_text(NOTES_LADDER)
    return make_settings(tmp_path, ladders_dir=ladders)


@pytest.fixture
def local(sdk_settings: Settings) -> Iterator[Cairn]:
    """The sync SDK against the real app, in-process."""
    with Cairn.local(sdk_settings) as client:
        yield client


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def live_server(app: Any) -> Iterator[str]:
    """Run ``app`` under uvicorn on a free 127.0.0.1 port until the block ends."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host="127.0.0.1",
            port=port,
            log_level="warning",
            access_log=False,
            lifespan="on",
            ws="none",
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)
