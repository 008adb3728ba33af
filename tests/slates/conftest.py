"""Slate fixtures: the seed's YAML as a ladder file, a ``Slates`` service on each backend, and
an HTTP client whose ladders directory holds the seed ladder."""

from __future__ import annotations

import http.server
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient

from cairn.app import create_app
from cairn.core.tokens import get_tokenizer
from cairn.services import Services
from cairn.slates.config import parse_slates
from cairn.slates.service import Slates
from cairn.store import Store
from tests.conftest import make_settings

# The seed's declaration, verbatim.
SEED_YAML = """\
slates:
  - title: Memory
    folders:
      - name: facts
        tokenLimit: 500
        evictionPolicy: FIFO
        files:
          - { name: core.md, init: blank }
      - name: lessons
        tokenLimit: 300
        evictionPolicy: LRU
        files:
          - { name: failures.md, init: blank }
          - { name: wins.md, init: blank }
"""

count = get_tokenizer().count


def folder_slate(
    policy: str,
    limit: int,
    files: list[str],
    *,
    title: str = "S",
    partition: str = "ladder",
    init: dict[str, str] | None = None,
) -> Any:
    """One slate with one folder ``f`` holding ``files``."""
    return parse_slates(
        [
            {
                "title": title,
                "partition": partition,
                "folders": [
                    {
                        "name": "f",
                        "tokenLimit": limit,
                        "evictionPolicy": policy,
                        "files": [{"name": n, "init": (init or {}).get(n, "blank")} for n in files],
                    }
                ],
            }
        ],
        "test",
    )[0]


@pytest.fixture
def slates(store: Store) -> Slates:
    """A Slates service on each backend, with the seed ladder declared as ``memory-ladder``."""
    s = Slates(store)
    s.declare("memory-ladder", parse_slates(yaml.safe_load(SEED_YAML)["slates"], "seed"))
    return s


def fresh_ladder(slates: Slates, *specs: Any) -> str:
    """Declare ``specs`` under a new ladder name (state starts empty)."""
    name = f"l-{uuid.uuid4().hex[:10]}"
    slates.declare(name, list(specs))
    return name


@pytest.fixture
def ladders_dir(tmp_path: Path) -> Path:
    d = tmp_path / "ladders"
    d.mkdir()
    (d / "memory-ladder.yaml").write_text(SEED_YAML)
    (d / "per-user.yaml").write_text(
        "slates:\n"
        "  - title: Notes\n"
        "    partition: user\n"
        "    folders:\n"
        "      - name: inbox\n"
        "        tokenLimit: 50\n"
        "        evictionPolicy: reject\n"
        "        files:\n"
        "          - { name: todo.md, init: 'nothing yet' }\n"
        "      - name: scratch\n"
        "        tokenLimit: 20\n"
        "        evictionPolicy: FIFO\n"
    )
    return d


@pytest.fixture
def slate_services(db_url: str, tmp_path: Path, ladders_dir: Path) -> Iterator[Services]:
    settings = make_settings(tmp_path, database_url=db_url, ladders_dir=ladders_dir)
    s = Services.from_settings(settings)
    yield s
    s.close()


@pytest.fixture
def api(slate_services: Services) -> Iterator[TestClient]:
    """The real app on each backend, open mode (tenant ``default``)."""
    with TestClient(create_app(services=slate_services)) as c:
        yield c


SECRET_SCHEMA = b'{"properties": {"fact": {"enum": ["SECRET"]}}}'


@dataclass
class SecretSchemas:
    """A schema that would refuse the fact "x", served over HTTP (``url``) and as a file
    (``file_uri``); ``hits`` lists every request the server received."""

    url: str
    file_uri: str
    hits: list[str] = field(default_factory=list)


@pytest.fixture
def secret_schemas(tmp_path: Path) -> Iterator[SecretSchemas]:
    served = SecretSchemas("", (tmp_path / "secret.json").as_uri())
    (tmp_path / "secret.json").write_bytes(SECRET_SCHEMA)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            served.hits.append(self.path)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(SECRET_SCHEMA)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    served.url = f"http://127.0.0.1:{server.server_address[1]}/secret.json"
    try:
        yield served
    finally:
        server.shutdown()
        server.server_close()
