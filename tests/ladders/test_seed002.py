"""Seed 002 as written: JSON extraction over every value, gates without a condition, refused
writes reported with the response, and the matched JSON removed from the reply — through the
real HTTP app, on both backends."""

from __future__ import annotations

import json
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


# A `reject` folder with room for one fact: the second call's write is refused.
REJECT = """
slates:
  - title: Memory
    folders:
      - name: facts
        tokenLimit: 12
        evictionPolicy: reject
        files:
          - { name: core.md, init: blank }
providers:
  s:
    kind: scripted
    rules:
      - contains: "huge"
        reply: '{"fact": "%s"}'
    default: |-
      Rome.
      ```json
      {"fact": "Rome is the capital of Italy."}
      ```
models: {"*": s}
steps:
  - id: answer
    fields: [{ name: Question, type: text, from: input.context }]
    slateWrite:
      to: { slate: Memory, folder: facts, file: core.md }
      field: fact
      match: { type: object, required: [fact] }
""" % ("word " * 40)

# The same, with the step options of points 6 and 7.
STRICT = REJECT.replace(
    "      match: { type: object, required: [fact] }",
    "      match: { type: object, required: [fact] }\n    onRejected: fail\n    stripMatch: true",
)

# A gated write to the same one-fact folder, failing the call when refused.
GATED_STRICT = (
    REJECT[: REJECT.index("providers:")]
    + """providers:
  s: { kind: scripted, default: "%s" }
models: {"*": s}
steps:
  - id: answer
    if: { then: { write: { to: { slate: Memory, folder: facts, file: core.md } } } }
    onRejected: fail
"""
    % ("word " * 8)
)


@pytest.fixture
def client(db_url: str, tmp_path: Path) -> Iterator[TestClient]:
    d = tmp_path / "ladders"
    d.mkdir()
    write_ladder(d, "thinking", THINKING)
    write_ladder(d, "always", ALWAYS)
    write_ladder(d, "reject", REJECT)
    write_ladder(d, "strict", STRICT)
    write_ladder(d, "gated-strict", GATED_STRICT)
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


def stream_events(client: TestClient, ladder: str, text: str = "Capital of Italy?") -> list[Any]:
    r = ask(client, ladder, text, stream=True)
    assert r.status_code == 200, r.text
    out: list[Any] = []
    for line in r.text.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            out.append(json.loads(line[len("data: ") :]))
    return out


def streamed_text(events: list[Any]) -> str:
    return "".join(
        e["choices"][0]["delta"].get("content") or "" for e in events if e.get("choices")
    )


def metric(client: TestClient, outcome: str, reason: str, ladder: str) -> float:
    text = client.get("/metrics").text
    pattern = (
        rf'cairn_slate_writes_total{{ladder="{ladder}",outcome="{outcome}",reason="{reason}"}} '
        r"([0-9.]+)"
    )
    found = re.search(pattern, text)
    return float(found.group(1)) if found else 0.0


def test_refused_writes_are_returned_with_the_response_and_counted(client: TestClient) -> None:
    first = ask(client, "reject")
    assert first.status_code == 200
    body = first.json()
    assert body["cairn"]["run_id"] == first.headers["X-Cairn-Run-Id"]
    assert [w["outcome"] for w in body["cairn"]["writes"]] == ["written"]
    second = ask(client, "reject")
    assert second.status_code == 200  # the default (onRejected: continue) still answers
    (write,) = second.json()["cairn"]["writes"]
    assert write["outcome"] == "refused" and write["reason"] == "slate_limit_exceeded"
    assert write["to"] == {"slate": "Memory", "folder": "facts", "file": "core.md"}
    assert write["step"] == "answer" and write["detail"]
    too_big = ask(client, "reject", "a huge fact").json()["cairn"]["writes"][0]
    assert too_big["reason"] == "slate_entry_too_large" and too_big["outcome"] == "refused"
    assert metric(client, "written", "", "reject") == 1
    assert metric(client, "refused", "slate_limit_exceeded", "reject") == 1
    assert metric(client, "refused", "slate_entry_too_large", "reject") == 1
    # A replay answers with the stored outcomes and is not counted again.
    key = {"Idempotency-Key": "replay-1"}
    body = {"model": "m", "messages": [{"role": "user", "content": "again"}]}
    r1 = client.post("/v1/local/reject/chat/completions", json=body, headers=key)
    r2 = client.post("/v1/local/reject/chat/completions", json=body, headers=key)
    assert r2.headers["Idempotent-Replayed"] == "true"
    assert r2.json()["cairn"] == r1.json()["cairn"]
    assert "Idempotent-Replayed" not in r1.headers
    # A replay asked for as a stream says so too, before its first event.
    streamed = client.post(
        "/v1/local/reject/chat/completions", json={**body, "stream": True}, headers=key
    )
    assert streamed.headers["Idempotent-Replayed"] == "true" and "data: " in streamed.text
    assert metric(client, "refused", "slate_limit_exceeded", "reject") == 2


def test_streaming_carries_the_outcomes_on_its_last_chunk(client: TestClient) -> None:
    ask(client, "reject")
    events = stream_events(client, "reject")
    final = [e for e in events if e.get("choices") and e["choices"][0]["finish_reason"] == "stop"]
    assert final[0]["cairn"]["writes"][0]["reason"] == "slate_limit_exceeded"
    assert metric(client, "refused", "slate_limit_exceeded", "reject") == 1


def test_on_rejected_fail_fails_the_call(client: TestClient) -> None:
    assert ask(client, "strict").status_code == 200
    r = ask(client, "strict")
    assert r.status_code == 409
    err = r.json()["error"]
    assert err["code"] == "slate_write_refused"
    assert "step 'answer'" in err["message"] and "slate_limit_exceeded" in err["message"]
    assert err["details"]["writes"][0]["outcome"] == "refused"
    assert r.headers["X-Cairn-Run-ID"] == err["details"]["run_id"]  # as every answer of a run
    run = client.get(f"/v1/runs/{err['details']['run_id']}").json()
    assert run["status"] == "failed" and run["trace"]["error"]["code"] == "slate_write_refused"
    assert metric(client, "refused", "slate_limit_exceeded", "strict") == 1
    # Streamed, the error arrives as the stream's error event.
    events = stream_events(client, "strict")
    assert events[-1]["error"]["code"] == "slate_write_refused"


def test_a_refused_gated_write_names_its_target(client: TestClient) -> None:
    assert ask(client, "gated-strict").status_code == 200
    r = ask(client, "gated-strict")
    assert r.status_code == 409, r.text
    err = r.json()["error"]
    assert "the gated to Memory/facts/core.md was refused" in err["message"], err["message"]
    write = err["details"]["writes"][-1]
    assert write["to"] == {"slate": "Memory", "folder": "facts", "file": "core.md"}


def test_strip_match_removes_the_written_json_from_the_reply(client: TestClient) -> None:
    plain = ask(client, "reject").json()["choices"][0]["message"]["content"]
    assert plain.startswith("Rome.") and '"fact"' in plain  # off by default
    shown = ask(client, "strict").json()["choices"][0]["message"]["content"]
    assert shown == "Rome."
    assert slate_file(client, "strict", "facts", "core.md") == "Rome is the capital of Italy."


def test_strip_match_streams_the_same_text(client: TestClient) -> None:
    events = stream_events(client, "strict")
    assert streamed_text(events) == "Rome."
    assert slate_file(client, "strict", "facts", "core.md") == "Rome is the capital of Italy."


def test_openai_clients_ignore_the_cairn_object_and_can_read_it(client: TestClient) -> None:
    import openai

    key, _ = client.app.state.services.store.keys.create("tenant-o")  # type: ignore[attr-defined]
    oa = openai.OpenAI(
        base_url="http://testserver/v1/local/reject", api_key=key, http_client=client
    )
    msgs: Any = [{"role": "user", "content": "Capital of Italy?"}]
    first = oa.chat.completions.create(model="gpt-4o", messages=msgs)
    assert first.choices[0].message.content is not None
    assert (first.model_extra or {})["cairn"]["writes"][0]["outcome"] == "written"
    refused = oa.chat.completions.create(model="gpt-4o", messages=msgs)
    assert (refused.model_extra or {})["cairn"]["writes"][0]["outcome"] == "refused"
    chunks = list(oa.chat.completions.create(model="gpt-4o", messages=msgs, stream=True))
    last = next(c for c in chunks if c.choices and c.choices[0].finish_reason == "stop")
    assert (last.model_extra or {})["cairn"]["writes"][0]["reason"] == "slate_limit_exceeded"
