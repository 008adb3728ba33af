"""OpenAI compatibility for generic front ends, through the real ``openai`` package against a
real server: the one base URL ``/v1/local`` (model = ladder), the per-ladder base URL's model
routes, OpenAI-shaped errors (401 for a wrong key) and refused tool/format parameters."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
from openai import OpenAI

from cairn.app import create_app
from cairn.services import Services
from tests.conftest import make_settings
from tests.ladders.conftest import Cairn, running_cairn, serve

QUESTION = "What is the capital of France?"


def base_client(cairn: Cairn, key: str | None = None) -> OpenAI:
    return OpenAI(base_url=f"{cairn.url}/v1/local", api_key=key or cairn.key, max_retries=0)


@pytest.fixture(params=["sqlite", "postgres"])
def any_cairn(request: pytest.FixtureRequest, tmp_path: Path, ladders_dir: Path) -> Iterator[Cairn]:
    overrides = {}
    if request.param == "postgres":
        from tests.conftest import database_url

        overrides["database_url"] = database_url("postgres", tmp_path, request)
    with running_cairn(tmp_path, ladders_dir, **overrides) as c:
        yield c


def test_one_base_url_serves_every_ladder(any_cairn: Cairn) -> None:
    cairn = any_cairn
    client = base_client(cairn)
    ids = [m.id for m in client.models.list()]
    assert {"memory-ladder", "assistant"} <= set(ids)
    model = client.models.retrieve("memory-ladder")
    assert model.id == "memory-ladder" and model.owned_by == "cairn"

    reply = client.chat.completions.create(
        model="memory-ladder", messages=[{"role": "user", "content": QUESTION}]
    )
    assert reply.model == "memory-ladder"
    assert "Paris" in (reply.choices[0].message.content or "")

    stream = client.chat.completions.create(
        model="assistant",
        messages=[{"role": "user", "content": "My favourite colour is teal."}],
        stream=True,
    )
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == "Noted."


def test_per_ladder_base_url_lists_and_retrieves_its_model(cairn: Cairn) -> None:
    client = OpenAI(base_url=cairn.base("memory-ladder"), api_key=cairn.key, max_retries=0)
    assert [m.id for m in client.models.list()] == ["memory-ladder"]
    assert client.models.retrieve("memory-ladder").id == "memory-ladder"
    with pytest.raises(openai.NotFoundError) as err:
        client.models.retrieve("assistant")
    assert err.value.code == "model_not_found"
    # The listed id, sent back as `model`, runs the ladder with no model override.
    reply = client.chat.completions.create(
        model="memory-ladder", messages=[{"role": "user", "content": QUESTION}]
    )
    assert reply.model == "memory-ladder" and "Paris" in (reply.choices[0].message.content or "")


def test_errors_have_openais_shape(cairn: Cairn) -> None:
    with pytest.raises(openai.AuthenticationError) as auth:
        base_client(cairn, key="cairn_not-a-real-key").models.list()
    assert auth.value.status_code == 401 and auth.value.code == "invalid_api_key"
    r = httpx.get(f"{cairn.url}/v1/local/models")
    assert r.status_code == 401
    error = r.json()["error"]
    assert {"message", "type", "param", "code"} <= set(error)
    assert error["type"] == "authentication_error" and error["code"] == "missing_api_key"

    client = base_client(cairn)
    with pytest.raises(openai.NotFoundError) as missing:
        client.models.retrieve("no-such-ladder")
    assert missing.value.code == "model_not_found" and missing.value.param == "model"
    with pytest.raises(openai.NotFoundError) as unknown:
        client.chat.completions.create(
            model="no-such-ladder", messages=[{"role": "user", "content": QUESTION}]
        )
    assert unknown.value.code == "ladder_not_found"
    assert unknown.value.body["type"] == "not_found_error"  # type: ignore[index]
    with pytest.raises(openai.UnprocessableEntityError) as invalid:
        client.chat.completions.create(model="memory-ladder", messages=[])
    assert invalid.value.param == "messages" and invalid.value.code == "validation_error"
    # Cairn's other routes keep Cairn's shape.
    other = httpx.get(f"{cairn.url}/v1/subjects").json()["error"]
    assert "type" not in other and other["code"] == "missing_api_key"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("tools", [{"type": "function", "function": {"name": "f", "parameters": {}}}]),
        ("tool_choice", "required"),
        ("response_format", {"type": "json_object"}),
        ("functions", [{"name": "f", "parameters": {}}]),
    ],
)
@pytest.mark.parametrize("stream", [False, True])
def test_tool_and_format_parameters_are_refused_not_dropped(
    cairn: Cairn, field: str, value: object, stream: bool
) -> None:
    client = base_client(cairn)
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(
            model="memory-ladder",
            messages=[{"role": "user", "content": QUESTION}],
            stream=stream,
            **{field: value},  # type: ignore[arg-type]
        )
    assert err.value.status_code == 400
    assert err.value.code == "unsupported_parameter" and err.value.param == field
    assert field in err.value.message
    # Nothing ran: the fact was not written.
    core = cairn.services.slates.read_file(
        "tenant-a", "memory-ladder", "Memory", "facts", "core.md", peek=True
    )
    assert core == ""


@pytest.mark.parametrize(
    "part",
    [
        {"type": "image_url", "image_url": {"url": "http://x/y.png"}},
        {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
    ],
)
def test_a_content_part_that_is_not_text_is_refused_not_dropped(
    cairn: Cairn, part: dict[str, object]
) -> None:
    client = base_client(cairn)
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(
            model="memory-ladder",
            messages=[{"role": "user", "content": [{"type": "text", "text": QUESTION}, part]}],  # type: ignore[list-item]
        )
    assert err.value.code == "unsupported_parameter"
    assert err.value.param == "messages[0].content" and str(part["type"]) in err.value.message
    # An unknown ladder is named first, whatever the request asks.
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(
            model="no-such-ladder",
            messages=[{"role": "user", "content": [part]}],  # type: ignore[list-item]
        )
    # Text parts alone are read.
    reply = client.chat.completions.create(
        model="memory-ladder",
        messages=[{"role": "user", "content": [{"type": "text", "text": QUESTION}]}],
    )
    assert reply.choices[0].message.content


def test_harmless_defaults_of_those_parameters_are_accepted(cairn: Cairn) -> None:
    reply = base_client(cairn).chat.completions.create(
        model="memory-ladder",
        messages=[{"role": "user", "content": QUESTION}],
        response_format={"type": "text"},
        tools=[],
    )
    assert "Paris" in (reply.choices[0].message.content or "")


def test_model_is_required_on_the_shared_base_url(cairn: Cairn) -> None:
    r = httpx.post(
        f"{cairn.url}/v1/local/chat/completions",
        json={"messages": [{"role": "user", "content": QUESTION}]},
        headers={"Authorization": f"Bearer {cairn.key}"},
    )
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "model_required"
    assert r.json()["error"]["param"] == "model"


def test_the_openai_client_works_against_an_open_server(tmp_path: Path, ladders_dir: Path) -> None:
    """No key exists: the ``openai`` package still insists on one, and any is taken as none."""
    services = Services.from_settings(make_settings(tmp_path, ladders_dir=ladders_dir))
    try:
        with serve(create_app(services=services)) as url:
            client = OpenAI(base_url=f"{url}/v1/local", api_key="local", max_retries=0)
            assert "memory-ladder" in [m.id for m in client.models.list()]
            reply = client.chat.completions.create(
                model="memory-ladder", messages=[{"role": "user", "content": QUESTION}]
            )
            assert "Paris" in (reply.choices[0].message.content or "")
    finally:
        services.close()
