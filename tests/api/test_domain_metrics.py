"""The domain metrics move with the events behind them: context lanes, slate evictions and ladder
runs, through the real app on both backends (the pooled multiprocess case is in
tests/cli/test_metrics_processes.py)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from cairn.app import create_app
from cairn.services import Services
from tests.conftest import make_settings
from tests.ladders.conftest import write_ladder

# A FIFO folder with room for about two notes, and a ladder that writes each reply to it; the
# same ladder with a reject folder that fails the run when its write is refused.
NOTES = """
slates:
  - title: Notes
    folders:
      - name: log
        tokenLimit: 24
        evictionPolicy: FIFO
        files:
          - { name: a.md, init: blank }
providers:
  s: { kind: scripted, default: "Noted: the meeting moved to Friday — 金曜日に変更 ✅" }
models: {"*": s}
steps:
  - id: note
    if: { then: { write: { to: { slate: Notes, folder: log, file: a.md } } } }
"""
STRICT = """
slates:
  - title: Notes
    folders:
      - name: log
        tokenLimit: 4
        evictionPolicy: reject
        files:
          - { name: a.md, init: blank }
providers:
  s: { kind: scripted, default: '{"fact": "a fact far too long for four tokens"}' }
models: {"*": s}
steps:
  - id: answer
    slateWrite:
      to: { slate: Notes, folder: log, file: a.md }
      field: fact
      match: { type: object, required: [fact] }
    onRejected: fail
"""


@pytest.fixture
def client(db_url: str, tmp_path: Path) -> Iterator[TestClient]:
    d = tmp_path / "ladders"
    d.mkdir()
    write_ladder(d, "notes", NOTES)
    write_ladder(d, "strict", STRICT)
    services = Services.from_settings(make_settings(tmp_path, database_url=db_url, ladders_dir=d))
    try:
        with TestClient(create_app(services=services)) as c:
            yield c
    finally:
        services.close()


def sample(client: TestClient, name: str, **labels: str) -> float:
    """The value of one sample of /metrics (0 when it is not there yet)."""
    text = client.get("/metrics").text
    for line in text.splitlines():
        match = re.match(r"^([a-z_]+)(?:\{(.*)\})? (\S+)$", line)
        if not match or match.group(1) != name:
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', match.group(2) or ""))
        if all(found.get(k) == v for k, v in labels.items()):
            return float(match.group(3))
    return 0.0


def run(client: TestClient, ladder: str, **headers: str) -> Any:
    body = {"model": "m", "messages": [{"role": "user", "content": "Когда встреча?"}]}
    return client.post(f"/v1/local/{ladder}/chat/completions", json=body, headers=headers)


def test_a_context_call_times_each_lane(client: TestClient) -> None:
    episode = {
        "subject_id": "ana",
        "source": "chat",
        "type": "conversation.turn",
        "session_id": "s1",
        "payload": {"messages": [{"role": "user", "content": "Ich wohne in Berlin."}]},
    }
    assert client.post("/v1/episodes", json=episode).status_code == 201
    assert client.post("/v1/memories/compile", json={"subject_id": "ana"}).status_code == 200
    name = "cairn_context_lane_duration_seconds_count"
    before = {lane: sample(client, name, lane=lane) for lane in ("recent", "long_term", "pack")}
    assert before == {"recent": 0, "long_term": 0, "pack": 0}
    body = {"subject_id": "ana", "task": "Wo wohnt Ana?", "session_id": "s1"}
    for _ in range(2):
        assert client.post("/v1/context", json=body).status_code == 200
    for lane in ("recent", "summary", "documents", "long_term", "pack"):
        assert sample(client, name, lane=lane) == 2, lane
    assert sample(client, "cairn_context_lane_duration_seconds_sum", lane="long_term") > 0


def test_a_slate_write_that_evicts_counts_its_evictions(client: TestClient) -> None:
    url = "/v1/slates/notes/Notes/log/a.md"
    notes = ["первая заметка про встречу", "second note about the room", "第三条笔记 咖啡"]
    results = [client.post(url, json={"content": n}).json() for n in notes]
    evicted = sum(len(r["evictions"]) for r in results)
    assert evicted >= 1, results
    assert sample(client, "cairn_slate_evictions_total", policy="FIFO") == evicted
    # Each later write that evicts adds its own.
    r = client.post(url, json={"content": "one more"})
    assert r.status_code == 200, r.text
    total = evicted + len(r.json()["evictions"])
    assert sample(client, "cairn_slate_evictions_total", policy="FIFO") == total


def test_ladder_runs_are_counted_by_outcome(client: TestClient) -> None:
    assert run(client, "notes").status_code == 200
    assert run(client, "notes", **{"Idempotency-Key": "k-1"}).status_code == 200
    assert sample(client, "cairn_ladder_runs_total", outcome="completed") == 2
    # A retry with the same key replays the stored answer: counted as such, not as a run.
    assert run(client, "notes", **{"Idempotency-Key": "k-1"}).status_code == 200
    assert sample(client, "cairn_ladder_runs_total", outcome="replayed") == 1
    assert sample(client, "cairn_ladder_runs_total", outcome="completed") == 2
    # The run's writes evict from the FIFO folder like any other write.
    assert sample(client, "cairn_slate_evictions_total", policy="FIFO") >= 1
    failed = run(client, "strict")
    assert failed.status_code >= 400, failed.text
    assert sample(client, "cairn_ladder_runs_total", outcome="failed") == 1
