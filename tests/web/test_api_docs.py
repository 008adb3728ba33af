"""``/docs`` works offline: Swagger UI's assets come from the server (a PyPI package), not a
CDN. Checked over HTTP and in a real browser that refuses every other host."""

from __future__ import annotations

import re
from typing import Any

from fastapi.testclient import TestClient
from playwright.sync_api import expect

from cairn.app import create_app
from cairn.services import Services
from tests.web.conftest import LiveServer


def test_docs_page_refers_only_to_local_assets(backend_services: Services) -> None:
    with TestClient(create_app(services=backend_services)) as client:
        page = client.get("/docs")
        assert page.status_code == 200
        urls = re.findall(r"""(?:src|href|url)\s*[:=]\s*['"]([^'"]+)['"]""", page.text)
        assert urls and not [u for u in urls if "://" in u or u.startswith("//")], urls
        for url in urls:
            asset = client.get(url)
            assert asset.status_code == 200 and asset.content, url
        js = client.get("/docs/assets/swagger-ui-bundle.js")
        assert "SwaggerUIBundle" in js.text
        assert client.get("/redoc").status_code == 404  # the CDN-only ReDoc page is off


def test_docs_render_in_a_browser_without_network(live_server: LiveServer, page: Any) -> None:
    outside: list[str] = []

    def only_local(route: Any) -> None:
        if route.request.url.startswith(live_server.url):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    page.route("**/*", only_local)
    page.goto(f"{live_server.url}/docs")
    expect(page.locator(".swagger-ui .title").first).to_contain_text("Cairn")
    expect(page.get_by_text("/v1/episodes", exact=True).first).to_be_visible()
    assert outside == []
