"""The seed-002 walkthrough through the real HTTP endpoint with the official ``openai`` client."""

from __future__ import annotations

import gc
import time
from pathlib import Path

import httpx
import openai
import pytest
from openai import OpenAI

from tests.ladders.conftest import Cairn, FakeModel, running_cairn, write_ladder

QUESTION_1 = "What is the capital of France?"
QUESTION_2 = "What is the capital of Germany?"


def client_for(cairn: Cairn, ladder: str = "memory-ladder", key: str | None = None) -> OpenAI:
    return OpenAI(base_url=cairn.base(ladder), api_key=key or cairn.key, max_retries=0)


def ask(client: OpenAI, question: str, **kwargs: object) -> object:
    return client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": question}], **kwargs
    )


def core_md(cairn: Cairn, tenant: str = "tenant-a") -> str:
    return cairn.services.slates.read_file(
        tenant, "memory-ladder", "Memory", "facts", "core.md", peek=True
    )


def run_trace(cairn: Cairn, run_id: str) -> dict:
    r = httpx.get(f"{cairn.url}/v1/runs/{run_id}", headers={"Authorization": f"Bearer {cairn.key}"})
    assert r.status_code == 200, r.text
    return r.json()


@pytest.fixture(params=["sqlite", "postgres"])
def seed_cairn(request: pytest.FixtureRequest, tmp_path: Path, ladders_dir: Path):
    """The example ladders on each backend."""
    overrides = {}
    if request.param == "postgres":
        from tests.conftest import database_url

        overrides["database_url"] = database_url("postgres", tmp_path, request)
    with running_cairn(tmp_path, ladders_dir, **overrides) as c:
        yield c


def test_verify_it_works_flow(seed_cairn: Cairn) -> None:
    """Call 1 appends the fact to core.md; call 2's KnownFacts holds it."""
    client = client_for(seed_cairn)
    first = ask(client, QUESTION_1)
    assert first.choices[0].message.content.startswith("Paris.")
    assert first.usage.prompt_tokens > 0 and first.usage.completion_tokens > 0
    assert core_md(seed_cairn) == "Paris is the capital of France."

    raw = client.chat.completions.with_raw_response.create(
        model="gpt-4o", messages=[{"role": "user", "content": QUESTION_2}]
    )
    second = raw.parse()
    assert "Paris is the capital of France" in second.choices[0].message.content
    run = run_trace(seed_cairn, raw.headers["x-cairn-run-id"])
    step = run["trace"]["steps"][0]
    known = next(f for f in step["fields"] if f["name"] == "KnownFacts")
    assert known["fallback_used"] is False
    assert step["messages"][1]["content"] == (
        "## Question\nWhat is the capital of Germany?\n\n"
        "## KnownFacts\nParis is the capital of France."
    )
    assert step["writes"][0]["written"] is True
    assert step["writes"][0]["value"] == "Berlin is the capital of Germany."
    assert core_md(seed_cairn) == (
        "Paris is the capital of France.\nBerlin is the capital of Germany."
    )


def test_first_call_uses_the_fallback(cairn: Cairn) -> None:
    raw = client_for(cairn).chat.completions.with_raw_response.create(
        model="gpt-4o", messages=[{"role": "user", "content": QUESTION_1}]
    )
    step = run_trace(cairn, raw.headers["x-cairn-run-id"])["trace"]["steps"][0]
    assert step["messages"] == [
        {
            "role": "system",
            "content": 'Answer. If you discover a durable fact, emit JSON {"fact": "..."}.',
        },
        {
            "role": "user",
            "content": "## Question\nWhat is the capital of France?\n\n"
            "## KnownFacts\nNo prior facts available.",
        },
    ]
    assert step["slate_reads"][0]["fallback_used"] is True


def test_streaming_with_the_openai_client(cairn: Cairn) -> None:
    client = client_for(cairn)
    stream = ask(client, QUESTION_1, stream=True, stream_options={"include_usage": True})
    pieces, usage, finish = [], None, None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            if choice.delta.content:
                pieces.append(choice.delta.content)
            finish = choice.finish_reason or finish
    text = "".join(pieces)
    # The example step has stripMatch: the caller sees the answer, not the JSON it wrote.
    assert text == "Paris."
    assert finish == "stop"
    assert usage is not None and usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    # The write happened after the stream, exactly as without streaming.
    assert core_md(cairn) == "Paris is the capital of France."


def test_idempotency_key_retry_writes_nothing_new(cairn: Cairn) -> None:
    client = client_for(cairn)
    headers = {"Idempotency-Key": "retry-1"}
    first = ask(client, QUESTION_1, extra_headers=headers)
    again = ask(client, QUESTION_1, extra_headers=headers)
    streamed = "".join(
        c.choices[0].delta.content or ""
        for c in ask(client, QUESTION_1, extra_headers=headers, stream=True)
        if c.choices
    )
    assert again.id == first.id == "chatcmpl-retry-1"
    assert again.choices[0].message.content == first.choices[0].message.content == streamed
    assert core_md(cairn) == "Paris is the capital of France."  # one entry, not three
    runs = httpx.get(f"{cairn.url}/v1/runs", headers={"X-API-Key": cairn.key}).json()
    assert runs["total"] == 1 and runs["runs"][0]["id"] == "retry-1"

    # The same key for a different request is refused, and writes nothing.
    with pytest.raises(openai.ConflictError) as err:
        ask(client, QUESTION_2, extra_headers=headers)
    assert err.value.body["code"] == "idempotency_key_reused"
    assert core_md(cairn) == "Paris is the capital of France."


def test_output_not_matching_the_schema_writes_nothing(tmp_path: Path, ladders_dir: Path) -> None:
    """The model emits {"fact": "Rome"}: shorter than minLength 5, so nothing is written and
    the trace says why."""
    replies = ladders_dir / "replies" / "memory-ladder.yaml"
    replies.write_text(
        replies.read_text().replace(
            "rules:\n",
            'rules:\n  - contains: "capital of Italy"\n    reply: \'{"fact": "Rome"}\'\n',
            1,
        )
    )
    with running_cairn(tmp_path, ladders_dir) as c:
        raw = client_for(c).chat.completions.with_raw_response.create(
            model="gpt-4o", messages=[{"role": "user", "content": "What is the capital of Italy?"}]
        )
        assert raw.parse().choices[0].message.content == '{"fact": "Rome"}'
        run = run_trace(c, raw.headers["x-cairn-run-id"])
        write = run["trace"]["steps"][0]["writes"][0]
        assert write["written"] is False
        assert write["reason"] == "schema_mismatch", write
        assert "fact" in write["detail"]
        assert run["effects"] == []
        assert core_md(c) == ""
        # Output with no JSON at all is a no-op too, with its own reason.
        raw = client_for(c).chat.completions.with_raw_response.create(
            model="gpt-4o", messages=[{"role": "user", "content": "Anything?"}]
        )
        write = run_trace(c, raw.headers["x-cairn-run-id"])["trace"]["steps"][0]["writes"][0]
        assert write["written"] is False and write["reason"] != "schema_mismatch"
        assert core_md(c) == ""


def test_models_list_and_unknown_ladder(cairn: Cairn) -> None:
    client = client_for(cairn)
    ids = [m.id for m in OpenAI(base_url=f"{cairn.url}/v1/local", api_key=cairn.key).models.list()]
    assert "memory-ladder" in ids
    with pytest.raises(openai.NotFoundError) as err:
        ask(client_for(cairn, "no-such-ladder"), QUESTION_1)
    assert err.value.body["code"] == "ladder_not_found"
    del client


def test_auth_and_tenant_isolation(cairn: Cairn) -> None:
    r = httpx.post(
        f"{cairn.base('memory-ladder')}/chat/completions",
        json={"messages": [{"role": "user", "content": QUESTION_1}]},
    )
    assert r.status_code == 401 and r.json()["error"]["code"] == "missing_api_key"
    with pytest.raises(openai.AuthenticationError):
        ask(client_for(cairn, key="cairn_not-a-real-key"), QUESTION_1)
    raw = client_for(cairn).chat.completions.with_raw_response.create(
        model="gpt-4o", messages=[{"role": "user", "content": QUESTION_1}]
    )
    run_id = raw.headers["x-cairn-run-id"]
    # Tenant b sees neither tenant a's run nor its slate.
    r = httpx.get(f"{cairn.url}/v1/runs/{run_id}", headers={"X-API-Key": cairn.other_key})
    assert r.status_code == 404 and r.json()["error"]["code"] == "run_not_found"
    assert (
        httpx.get(f"{cairn.url}/v1/runs", headers={"X-API-Key": cairn.other_key}).json()["total"]
        == 0
    )
    assert core_md(cairn, "tenant-b") == ""
    ask(client_for(cairn, key=cairn.other_key), QUESTION_2)
    assert core_md(cairn, "tenant-b") == "Berlin is the capital of Germany."
    assert core_md(cairn) == "Paris is the capital of France."


def test_invalid_requests_are_clear_4xx(cairn: Cairn) -> None:
    h = {"Authorization": f"Bearer {cairn.key}"}
    url = f"{cairn.base('memory-ladder')}/chat/completions"
    r = httpx.post(url, headers=h, json={"model": "gpt-4o", "messages": []})
    assert r.status_code == 422 and r.json()["error"]["code"] == "validation_error"
    for key in ("has space", ""):  # an empty header is a malformed key, not an absent one
        r = httpx.post(
            url,
            headers={**h, "Idempotency-Key": key},
            json={"messages": [{"role": "user", "content": "hi"}]},
        )
        assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_idempotency_key"
    r = httpx.post(url, headers=h, json={"messages": [{"role": "user", "content": "x"}], "n": 2})
    assert r.status_code == 422
    for stream in ("yes", 1, "true"):  # a flag is a JSON boolean
        body = {"messages": [{"role": "user", "content": "x"}], "stream": stream}
        r = httpx.post(url, headers=h, json=body)
        assert r.status_code == 422 and r.json()["error"]["code"] == "validation_error", stream
    # As OpenAI: a user, system, developer or tool message needs content (an assistant's not).
    for message in ({"role": "user"}, {"role": "system", "content": None}):
        body = {"messages": [message, {"role": "user", "content": "x"}]}
        r = httpx.post(url, headers=h, json=body)
        assert r.status_code == 422 and r.json()["error"]["code"] == "validation_error", r.text
        assert r.json()["error"]["param"] == "messages.0", r.text
    runs = httpx.get(f"{cairn.url}/v1/runs", headers=h).json()
    assert runs["total"] == 0  # bad input changed nothing


def test_runs_listing(cairn: Cairn) -> None:
    client = client_for(cairn)
    ask(client, QUESTION_1)
    ask(client, QUESTION_2)
    h = {"X-API-Key": cairn.key}
    body = httpx.get(f"{cairn.url}/v1/runs", headers=h, params={"limit": 1}).json()
    assert body["total"] == 2 and len(body["runs"]) == 1
    newest = body["runs"][0]
    assert newest["status"] == "completed" and newest["ladder"] == "memory-ladder"
    one = httpx.get(f"{cairn.url}/v1/runs/{newest['id']}", headers=h).json()
    assert one["response"]["choices"][0]["message"]["content"].startswith("Berlin")
    assert one["effects"] == ["answer/slateWrite/0"]
    r = httpx.get(f"{cairn.url}/v1/runs", headers=h, params={"status": "weird"})
    assert r.status_code == 422


def test_a_ladder_file_with_its_own_name(tmp_path: Path, ladders_dir: Path) -> None:
    write_ladder(
        ladders_dir,
        "file-name",
        """
name: echo
providers:
  p: {kind: scripted, default: "echo!"}
models: {"*": p}
""",
    )
    with running_cairn(tmp_path, ladders_dir) as c:
        reply = ask(client_for(c, "echo"), "hello")
        assert reply.choices[0].message.content == "echo!"
        assert reply.model == "gpt-4o"


def test_nul_characters_are_refused(cairn: Cairn) -> None:
    r = httpx.post(
        f"{cairn.base('memory-ladder')}/chat/completions",
        headers={"Authorization": f"Bearer {cairn.key}"},
        json={"messages": [{"role": "user", "content": "a\u0000b"}]},
    )
    assert r.status_code == 422 and "NUL" in r.json()["error"]["message"]


def test_a_stream_the_client_leaves_ends_its_run_at_once(
    tmp_path: Path, ladders_dir: Path, fake_model: tuple[FakeModel, str]
) -> None:
    """A client that closes a stream mid-reply: the run is recorded as failed when the
    stream next moves (not when the garbage collector finds it, a minute later), so a retry
    with the same key runs it again instead of a 409 ``run_in_progress``."""
    model, url = fake_model
    model.reply = lambda body: "the first half, " + "then the second half"
    model.piece_delay_s = 1.5
    write_ladder(
        ladders_dir,
        "slow",
        f"""
providers:
  p: {{kind: openai, baseUrl: "{url}"}}
models: {{"*": p}}
""",
    )
    # The garbage collector must not be what ends the run (it did, a minute or more later,
    # when the stream's generator sat in a reference cycle).
    gc.disable()
    try:
        _leave_a_stream(tmp_path, ladders_dir, model)
    finally:
        gc.enable()


def _leave_a_stream(tmp_path: Path, ladders_dir: Path, model: FakeModel) -> None:
    with running_cairn(tmp_path, ladders_dir) as c:
        headers = {"Authorization": f"Bearer {c.key}", "Idempotency-Key": "left-1"}
        body = {"messages": [{"role": "user", "content": "hi"}], "stream": True}
        with httpx.stream(
            "POST", f"{c.base('slow')}/chat/completions", headers=headers, json=body, timeout=30
        ) as r:
            assert r.status_code == 200
            next(r.iter_lines())  # the first chunk, then the client goes away
        status = None
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            run = httpx.get(
                f"{c.url}/v1/runs/left-1", headers={"Authorization": f"Bearer {c.key}"}
            ).json()
            status = run["status"]
            if status != "running":
                break
            time.sleep(0.1)
        assert status == "failed" and "disconnect" in str(run.get("error")), run
        model.piece_delay_s = 0.0
        again = httpx.post(
            f"{c.base('slow')}/chat/completions",
            headers=headers,
            json={**body, "stream": False},
            timeout=30,
        )
        assert again.status_code == 200, again.text
