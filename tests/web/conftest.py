"""Browser tests: a live Cairn server on loopback and one headless Debian Chromium per session.

The server is the real app (``create_app``) served by uvicorn in a thread on a free port of
127.0.0.1, over a real SQLite file; the browser is ``/usr/bin/chromium`` driven by Playwright
(never a downloaded browser). Every test gets a fresh browser context (its own cookies).

Screenshots are always taken (into the test's temporary directory); with
``CAIRN_UPDATE_SCREENSHOTS=1`` they are written to ``docs/screenshots/`` instead.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi.testclient import TestClient

from cairn.app import create_app
from cairn.config import Settings
from cairn.services import Services

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
ROOT = Path(__file__).resolve().parents[2]
DOCS_SCREENSHOTS = ROOT / "docs" / "screenshots"
VIEWPORT = {"width": 1280, "height": 800}


@dataclass
class LiveServer:
    """A running server: its base URL, its services (to seed data), and its keys."""

    url: str
    services: Services
    keys: dict[str, str] = field(default_factory=dict)
    data_dir: Path | None = None

    def api(self, tenant: str = "a") -> httpx.Client:
        """An HTTP client of the server's API, authenticated as ``tenant``'s key (if any)."""
        headers = {"X-API-Key": self.keys[tenant]} if self.keys else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=10)


def _serve(services: Services) -> tuple[uvicorn.Server, threading.Thread, str]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        create_app(services=services),
        log_level="warning",
        access_log=False,
        ws="none",
        lifespan="on",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    return server, thread, f"http://127.0.0.1:{port}"


def _stop(server: uvicorn.Server, thread: threading.Thread, services: Services) -> None:
    server.should_exit = True
    thread.join(timeout=15)
    services.close()


def make_ladders_dir(target: Path) -> Path:
    """The docs' example ladders plus this directory's ``ladders/*.yaml``, copied to ``target``."""
    shutil.copytree(ROOT / "examples" / "ladders", target)
    for path in (Path(__file__).parent / "ladders").glob("*.yaml"):
        shutil.copy(path, target)
    return target


def server_settings(data_dir: Path, **overrides: Any) -> Settings:
    # Lexical only, as in tests/conftest.py: with an embedder, vectors arrive in the background
    # and a page and an API call made a moment apart could rank differently.
    values: dict[str, Any] = {"data_dir": data_dir, "embedder": "none"}
    values.update(overrides)
    return Settings(**values)


@pytest.fixture(scope="session")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A server that requires keys: tenant ``a`` and tenant ``b`` each have one. Its ladders
    are the example ladder of the docs and ``ladders/web-notes.yaml`` (small slates)."""
    data_dir = tmp_path_factory.mktemp("web-server")
    ladders = make_ladders_dir(data_dir / "ladders")
    services = Services.from_settings(server_settings(data_dir, ladders_dir=ladders))
    key_a, _ = services.store.keys.create("tenant-a", name="web tests")
    key_b, _ = services.store.keys.create("tenant-b", name="web tests")
    server, thread, url = _serve(services)
    try:
        yield LiveServer(url, services, {"a": key_a, "b": key_b}, data_dir)
    finally:
        _stop(server, thread, services)


@pytest.fixture(scope="module")
def open_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A server with no key at all: open mode, tenant ``default``."""
    services = Services.from_settings(server_settings(tmp_path_factory.mktemp("web-open")))
    server, thread, url = _serve(services)
    try:
        yield LiveServer(url, services)
    finally:
        _stop(server, thread, services)


@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    """One headless Debian Chromium for the browser tests. Package-scoped: Playwright's sync
    API keeps an event loop running on the main thread while it is open, so it is closed
    when the last browser test is done, before other tests call ``asyncio.run``."""
    if not os.path.exists(CHROMIUM):
        pytest.fail(
            f"{CHROMIUM} is missing: the browser tests drive Debian's Chromium. "
            "Install it with: scripts/setup.sh --system",
            pytrace=False,
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh page in its own browser context (no cookies from other tests)."""
    from playwright.sync_api import expect

    context = browser.new_context(viewport=VIEWPORT, base_url=None)
    context.set_default_timeout(10_000)
    # Assertions wait as long as actions do: under the whole suite's load (two workers on two
    # cores) Swagger UI's megabyte of JavaScript took more than expect's default 5 s to render.
    expect.set_options(timeout=10_000)
    p = context.new_page()
    try:
        yield p
    finally:
        context.close()


@pytest.fixture
def sign_in(live_server: LiveServer) -> Callable[[Any, str], None]:
    """Sign ``page`` in through the form as tenant ``a`` or ``b``."""

    def do(page: Any, tenant: str = "a") -> None:
        page.goto(f"{live_server.url}/ui/login")
        page.get_by_label("API key").fill(live_server.keys[tenant])
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url("**/ui/subjects")

    return do


@pytest.fixture
def shoot(tmp_path: Path) -> Callable[[Any, str], Path]:
    """Take a full-page screenshot named ``name`` (see the module docstring for where)."""

    def do(page: Any, name: str) -> Path:
        target_dir = DOCS_SCREENSHOTS if os.environ.get("CAIRN_UPDATE_SCREENSHOTS") else tmp_path
        target_dir.mkdir(parents=True, exist_ok=True)
        path = target_dir / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        assert path.stat().st_size > 1000
        return path

    return do


def unique(prefix: str) -> str:
    """A subject id no other test uses (tests share one server)."""
    return f"{prefix}-{secrets.token_hex(4)}"


@pytest.fixture
def app_services(tmp_path: Path) -> Iterator[Services]:
    """Services of an inspector in open mode, with the example ladders and ``web-notes``."""
    ladders = make_ladders_dir(tmp_path / "ladders")
    s = Services.from_settings(server_settings(tmp_path / "data", ladders_dir=ladders))
    yield s
    s.close()


@pytest.fixture
def web(app_services: Services) -> Iterator[TestClient]:
    """The inspector over plain HTTP (no browser), redirects not followed."""
    with TestClient(create_app(services=app_services), follow_redirects=False) as c:
        yield c
