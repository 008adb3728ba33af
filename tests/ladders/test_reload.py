"""Ladder hot reload: a saved file serves within a second, an invalid one is reported and
leaves the rest (and its own previous version) serving; the watcher lives and dies with the
app. Through the real HTTP app, on both backends."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from cairn.app import create_app
from cairn.cli.main import app as cli
from cairn.services import Services
from tests.conftest import make_settings
from tests.ladders.conftest import running_cairn, write_ladder

ECHO = """
providers:
  s: {kind: scripted, default: "%s"}
models: {"*": s}
"""

# The guide's ladder, saved while the server runs (seed 002: "After saving the ladder, call it
# twice. The first call writes to the slate; the second call reads what was written.")
MEMORY = """
slates:
  - title: Memory
    folders:
      - name: facts
        tokenLimit: 500
        evictionPolicy: FIFO
        files:
          - { name: core.md, init: blank }
providers:
  s:
    kind: scripted
    rules:
      - regex: "KnownFacts\\\\nOslo is the capital of Norway"
        reply: "I remember: Oslo."
    default: '{"fact": "Oslo is the capital of Norway."}'
models: {"*": s}
steps:
  - id: answer
    fields:
      - { name: Question, type: text, from: input.context }
      - name: KnownFacts
        type: slateRead
        from: { slate: Memory, folder: facts, file: core.md }
        fallback: "No prior facts available."
    slateWrite:
      to: { slate: Memory, folder: facts, file: core.md }
      field: fact
      on: append
      match:
        type: object
        required: [fact]
        properties:
          fact: { type: string, minLength: 5 }
"""

WATCHER = "cairn-ladder-watcher"


def within(seconds: float, check: Callable[[], bool]) -> float:
    """Seconds until ``check()`` held (fails after ``seconds``)."""
    t0 = time.monotonic()
    while not check():
        if time.monotonic() - t0 > seconds:
            raise AssertionError(f"not within {seconds} s")
        time.sleep(0.02)
    return time.monotonic() - t0


def save(path: Path, text: str) -> None:
    """Write as an editor does: a new file renamed over the old one."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def ask(client: TestClient, ladder: str, text: str = "hello") -> Any:
    body = {"model": "m", "messages": [{"role": "user", "content": text}]}
    return client.post(f"/v1/local/{ladder}/chat/completions", json=body)


def reply(client: TestClient, ladder: str, text: str = "hello") -> str:
    r = ask(client, ladder, text)
    assert r.status_code == 200, r.text
    return str(r.json()["choices"][0]["message"]["content"])


@pytest.fixture
def ladders(tmp_path: Path) -> Path:
    d = tmp_path / "ladders"
    d.mkdir()
    write_ladder(d, "alpha", ECHO % "alpha v1")
    write_ladder(d, "broken", "steps: [{id: x, fields: [{name: Q, type: text, from: nowhere}]}]")
    return d


@pytest.fixture
def client(db_url: str, tmp_path: Path, ladders: Path) -> Iterator[TestClient]:
    services = Services.from_settings(
        make_settings(tmp_path, database_url=db_url, ladders_dir=ladders)
    )
    try:
        with TestClient(create_app(services=services)) as c:
            yield c
    finally:
        services.close()
    assert not [t for t in threading.enumerate() if t.name == WATCHER]


def test_an_invalid_file_at_start_is_reported_and_the_rest_serve(client: TestClient) -> None:
    assert reply(client, "alpha") == "alpha v1"
    assert ask(client, "broken").status_code == 404
    state = client.get("/v1/ladders/broken").json()
    assert state["status"] == "invalid" and state["file"] == "broken.yaml"
    assert "unknown text source 'nowhere'" in state["error"]
    assert "/" not in state["error"].split(":")[0]  # the file, not this machine's path
    health = client.get("/healthz").json()
    assert health["ladders"] == {
        "serving": 1,
        "invalid": [{"name": "broken", "file": "broken.yaml", "status": "invalid"}],
    }
    listing = client.get("/v1/ladders").json()
    assert listing["serving"] == ["alpha"] and listing["errors"] == 1
    page = client.get("/ui/ladders")
    assert page.status_code == 200 and "unknown text source" in page.text
    assert client.get("/v1/ladders/nope").json()["error"]["code"] == "ladder_not_found"


def test_a_saved_ladder_serves_within_a_second_and_remembers(
    client: TestClient, ladders: Path
) -> None:
    save(ladders / "memory-ladder.yaml", MEMORY)
    within(1.0, lambda: ask(client, "memory-ladder").status_code == 200)
    # That first call wrote the fact; the second one reads it.
    assert reply(client, "memory-ladder", "Capital of Norway?") == "I remember: Oslo."
    assert client.get("/v1/ladders/memory-ladder").json()["status"] == "ok"


def test_an_invalid_save_keeps_the_previous_version_serving(
    client: TestClient, ladders: Path
) -> None:
    save(ladders / "alpha.yaml", "steps: [unclosed")
    within(1.0, lambda: client.get("/v1/ladders/alpha").json()["status"] == "stale")
    state = client.get("/v1/ladders/alpha").json()
    assert "not valid YAML" in state["error"] and state["models"] == ["alpha"]
    assert reply(client, "alpha") == "alpha v1"  # the previous good version
    assert "alpha.yaml" in client.get("/ui/ladders").text
    assert "previous version serves" in client.get("/ui/ladders/alpha").text
    save(ladders / "alpha.yaml", ECHO % "alpha v2 — ✅ 第二版")
    within(1.0, lambda: reply(client, "alpha") == "alpha v2 — ✅ 第二版")
    assert client.get("/v1/ladders/alpha").json()["error"] is None
    # Fixing the broken file, and removing a file, take effect too.
    save(ladders / "broken.yaml", ECHO % "fixed")
    within(1.0, lambda: ask(client, "broken").status_code == 200)
    (ladders / "alpha.yaml").unlink()
    within(1.0, lambda: ask(client, "alpha").status_code == 404)
    assert client.get("/healthz").json()["ladders"] == {"serving": 1, "invalid": []}


def test_a_name_clash_keeps_the_ladder_that_was_serving(client: TestClient, ladders: Path) -> None:
    save(ladders / "aaa.yaml", "name: alpha\n" + ECHO % "usurper")
    within(1.0, lambda: client.get("/v1/ladders").json()["errors"] == 2)
    assert reply(client, "alpha") == "alpha v1"
    errors = {e["file"]: e["error"] for e in client.get("/v1/ladders").json()["ladders"]}
    assert "already used by alpha.yaml" in errors["aaa.yaml"]


def test_reload_endpoint_and_cli(tmp_path: Path, ladders: Path) -> None:
    # With the watcher off, only an explicit reload picks the change up.
    with running_cairn(tmp_path, ladders, ladders_poll_s=0) as c:
        headers = {"X-API-Key": c.key}
        assert not [t for t in threading.enumerate() if t.name == WATCHER]
        write_ladder(ladders, "beta", ECHO % "beta")
        time.sleep(0.3)
        chat = f"{c.url}/v1/local/beta/chat/completions"
        body = {"messages": [{"role": "user", "content": "hi"}]}
        assert httpx.post(chat, json=body, headers=headers).status_code == 404
        r = httpx.post(f"{c.url}/v1/ladders/reload", headers=headers)
        assert r.status_code == 200 and "beta" in r.json()["serving"]
        assert httpx.post(chat, json=body, headers=headers).status_code == 200
        assert httpx.post(f"{c.url}/v1/ladders/reload").status_code == 401
        out = CliRunner().invoke(cli, ["ladders", "reload", "--url", c.url, "--api-key", c.key])
        assert out.exit_code == 3, out.output  # broken.yaml is invalid
        assert "ok alpha.yaml: alpha" in out.output and "invalid broken.yaml" in out.output
        (ladders / "broken.yaml").unlink()
        out = CliRunner().invoke(
            cli, ["ladders", "reload", "--url", c.url, "--api-key", c.key, "--json"]
        )
        assert out.exit_code == 0, out.output
        assert '"errors": 0' in out.output


def test_the_watcher_stops_with_the_app(tmp_path: Path, ladders: Path) -> None:
    services = Services.from_settings(make_settings(tmp_path, ladders_dir=ladders))
    try:
        with TestClient(create_app(services=services)):
            assert [t for t in threading.enumerate() if t.name == WATCHER]
        assert not [t for t in threading.enumerate() if t.name == WATCHER]
    finally:
        services.close()
