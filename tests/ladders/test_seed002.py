"""Seed 002 as written: JSON extraction over every value, gates without a condition, refused
writes reported with the response, and the matched JSON removed from the reply — through the
real HTTP app, on both backends."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from cairn.api.app import create_app
from cairn.services import Services
from tests.conftest import make_settings
from tests.ladders.conftest import write_ladder

SLATES = """
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

# The seed's slateWrite block, verbatim, under a step that thinks aloud before its result.
THINKING = (
    SLATES
    + """
providers:
  s:
    kind: scripted
    default: 'Thinking {"step": 1}. Result: {"fact": "Rome is the capital of Italy."}'
models: {"*": s}
steps:
  - id: answer
    fields:
      - { name: Question, type: text, from: input.context }
      - { name: KnownFacts, type: slateRead, from: { slate: Memory, folder: facts, file: core.md } }
    systemPrompt: 'Answer. If you discover a durable fact, emit JSON {"fact": "..."}.'
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
)

# A gated write as the seed writes it: `if: { then: { write: … } }`, no condition.
ALWAYS = (
    SLATES
    + """
providers:
  s: { kind: scripted, default: "Learnt: check the units — 単位を確認 ✅" }
models: {"*": s}
steps:
  - id: reflect
    if: { then: { write: { to: { slate: Memory, folder: lessons, file: wins.md } } } }
"""
)


@pytest.fixture
def client(db_url: str, tmp_path: Path) -> Iterator[TestClient]:
    d = tmp_path / "ladders"
    d.mkdir()
    write_ladder(d, "thinking", THINKING)
    write_ladder(d, "always", ALWAYS)
    services = Services.from_settings(make_settings(tmp_path, database_url=db_url, ladders_dir=d))
    try:
        with TestClient(create_app(services=services)) as c:
            yield c
    finally:
        services.close()


def ask(client: TestClient, ladder: str, text: str = "Capital of Italy?", **kw: Any) -> Any:
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": text}], **kw}
    return client.post(f"/v1/local/{ladder}/chat/completions", json=body)


def slate_file(client: TestClient, ladder: str, folder: str, file: str) -> str:
    r = client.get(f"/v1/slates/{ladder}/Memory/{folder}/{file}")
    assert r.status_code == 200, r.text
    return str(r.json()["content"])


def test_the_first_json_value_that_matches_is_written(client: TestClient) -> None:
    r = ask(client, "thinking")
    assert r.status_code == 200, r.text
    assert slate_file(client, "thinking", "facts", "core.md") == "Rome is the capital of Italy."


def test_a_gate_without_condition_writes_every_run(client: TestClient) -> None:
    for _ in range(2):
        assert ask(client, "always").status_code == 200
    line = "Learnt: check the units — 単位を確認 ✅"
    assert slate_file(client, "always", "lessons", "wins.md") == f"{line}\n{line}"
