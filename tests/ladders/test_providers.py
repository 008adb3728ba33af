"""Model providers: the OpenAI-compatible one against a fake server on loopback, and scripted."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from cairn.ladders.providers import (
    ChatReply,
    ChatRequest,
    ModelRoute,
    OpenAIChatProvider,
    ProviderError,
    ProviderNotConfigured,
    ProviderRouter,
    ScriptedProvider,
    ScriptedRule,
)
from tests.ladders.conftest import FakeModel, running_cairn, write_ladder

MESSAGES = [{"role": "user", "content": "hello"}]


def test_complete_sends_key_model_and_options(fake_model: tuple[FakeModel, str]) -> None:
    model, url = fake_model
    model.reply = lambda body: f"echo {body['messages'][-1]['content']}"
    p = OpenAIChatProvider("default", url, "sk-test", timeout_s=5)
    reply = p.complete(ChatRequest("m1", MESSAGES, {"temperature": 0.2}))
    assert reply == ChatReply("echo hello", "m1", 11, 7, "stop")
    assert model.requests[0]["temperature"] == 0.2 and model.requests[0]["model"] == "m1"
    assert model.headers[0]["authorization"] == "Bearer sk-test"
    p.close()


def test_stream_yields_deltas_then_the_reply(fake_model: tuple[FakeModel, str]) -> None:
    model, url = fake_model
    model.reply = lambda body: "streamed text"
    p = OpenAIChatProvider("default", url, timeout_s=5)
    items = list(p.stream(ChatRequest("m1", MESSAGES)))
    assert "".join(i for i in items if isinstance(i, str)) == "streamed text"
    assert isinstance(items[-1], ChatReply) and items[-1].content == "streamed text"
    assert items[-1].prompt_tokens == 11  # the server's usage chunk
    assert "authorization" not in model.headers[0]  # no key configured: none sent
    p.close()


def test_retries_overload_then_succeeds(fake_model: tuple[FakeModel, str]) -> None:
    model, url = fake_model
    model.fail_first = 2
    p = OpenAIChatProvider("default", url, retries=2, backoff_s=0.01, timeout_s=5)
    assert p.complete(ChatRequest("m", MESSAGES)).content == "fake reply"
    assert len(model.requests) == 3
    p.close()


def test_gives_up_after_retries_and_never_retries_a_client_error(
    fake_model: tuple[FakeModel, str],
) -> None:
    model, url = fake_model
    model.fail_first = 5
    p = OpenAIChatProvider("default", url, retries=1, backoff_s=0.01, timeout_s=5)
    with pytest.raises(ProviderError) as err:
        p.complete(ChatRequest("m", MESSAGES))
    assert err.value.status == 502 and "HTTP 503" in err.value.message
    assert len(model.requests) == 2
    model.fail_first, model.fail_status = 1, 400
    model.requests.clear()
    with pytest.raises(ProviderError, match="HTTP 400"):
        p.complete(ChatRequest("m", MESSAGES))
    assert len(model.requests) == 1
    p.close()


def test_a_key_the_server_repeats_is_not_in_the_error(fake_model: tuple[FakeModel, str]) -> None:
    model, url = fake_model
    model.fail_first, model.fail_status, model.echo_auth = 1, 401, True
    key, header = "sk-echoed-key-0123456789", "x-header-secret-value"
    p = OpenAIChatProvider("default", url, key, headers={"X-Org": header}, retries=0)
    with pytest.raises(ProviderError, match="HTTP 401") as err:
        p.complete(ChatRequest("m", MESSAGES))
    assert model.headers[0]["authorization"] == f"Bearer {key}"  # it was sent, and echoed
    assert key not in err.value.message and "[redacted]" in err.value.message
    assert model.headers[0]["x-org"] == header  # sent, and echoed: redacted too
    assert header not in err.value.message and err.value.message.count("[redacted]") == 2
    p.close()


def test_timeout_is_a_provider_error(fake_model: tuple[FakeModel, str]) -> None:
    model, url = fake_model
    model.delay_s = 1.0
    p = OpenAIChatProvider("default", url, retries=0, timeout_s=0.2)
    with pytest.raises(ProviderError, match="timed out"):
        p.complete(ChatRequest("m", MESSAGES))
    p.close()


def test_unreachable_server_is_a_provider_error() -> None:
    p = OpenAIChatProvider(
        "default", "http://127.0.0.1:9/v1", retries=1, backoff_s=0.01, timeout_s=1
    )
    with pytest.raises(ProviderError, match="could not connect"):
        p.complete(ChatRequest("m", MESSAGES))
    p.close()


def test_scripted_rules_default_and_no_match() -> None:
    p = ScriptedProvider(
        "s",
        [ScriptedRule("both", contains="a", regex=r"b\d"), ScriptedRule("only a", contains="a")],
        default=None,
    )
    assert p.complete(ChatRequest("m", [{"role": "user", "content": "a b1"}])).content == "both"
    assert p.complete(ChatRequest("m", [{"role": "user", "content": "a b"}])).content == "only a"
    with pytest.raises(ProviderError, match="no rule matching"):
        p.complete(ChatRequest("m", [{"role": "user", "content": "zzz"}]))
    deltas = [
        x
        for x in ScriptedProvider("s", [], "one two three").stream(ChatRequest("m", MESSAGES))
        if isinstance(x, str)
    ]
    assert deltas == ["one ", "two ", "three"]


def test_router_maps_names_and_reports_unserved_models() -> None:
    s = ScriptedProvider("s", [], "x")
    router = ProviderRouter({"s": s}, {"gpt-4o": ModelRoute("s", "local-7b")})
    assert router.resolve("gpt-4o") == (s, "local-7b")
    with pytest.raises(ProviderNotConfigured) as err:
        router.resolve("other")  # falls to 'default', which is not configured
    assert err.value.status == 503 and err.value.code == "provider_not_configured"
    wildcard = ProviderRouter({"s": s}, {"*": ModelRoute("s")}, default_model="fallback")
    assert wildcard.resolve(None) == (s, "fallback")


def test_default_provider_from_settings_through_the_endpoint(
    tmp_path: Path,
    fake_model: tuple[FakeModel, str],
) -> None:
    """CAIRN_LLM_BASE_URL / _API_KEY / _MODEL configure the default provider; the key never
    reaches the trace, even when a user pastes it into a message."""
    model, url = fake_model
    model.reply = lambda body: "from the fake server"
    ladders = tmp_path / "ladders"
    ladders.mkdir()
    write_ladder(ladders, "plain", "steps:\n  - id: reply\n    systemPrompt: Be brief.\n")
    secret = "sk-very-secret-key-123"
    with running_cairn(
        tmp_path, ladders, llm_base_url=url, llm_api_key=secret, llm_model="served-model"
    ) as c:
        r = httpx.post(
            f"{c.base('plain')}/chat/completions",
            headers={"Authorization": f"Bearer {c.key}"},
            json={"messages": [{"role": "user", "content": f"my key is {secret}"}]},
        )
        assert r.status_code == 200, r.text
        assert r.json()["choices"][0]["message"]["content"] == "from the fake server"
        assert model.requests[0]["model"] == "served-model"
        assert model.requests[0]["messages"] == [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": f"my key is {secret}"},
        ]
        assert model.headers[0]["authorization"] == f"Bearer {secret}"
        run = httpx.get(
            f"{c.url}/v1/runs/{r.headers['x-cairn-run-id']}", headers={"X-API-Key": c.key}
        ).text
        assert secret not in run and "[redacted]" in run
        assert c.key not in run

        # The model server failing is a 502 with a stable code, and the run is recorded; a
        # server that repeats the key it was sent has it redacted everywhere.
        model.fail_first, model.echo_auth = 10, True
        r = httpx.post(
            f"{c.base('plain')}/chat/completions",
            headers={"Authorization": f"Bearer {c.key}", "Idempotency-Key": "f-1"},
            json={"messages": [{"role": "user", "content": "hi"}]},
        )
        assert r.status_code == 502 and r.json()["error"]["code"] == "provider_error"
        assert r.headers["X-Cairn-Run-ID"] == "f-1"
        assert secret not in r.text and "[redacted]" in r.json()["error"]["message"]
        failed = httpx.get(f"{c.url}/v1/runs/f-1", headers={"X-API-Key": c.key}).json()
        assert failed["status"] == "failed" and failed["trace"]["error"]["code"] == "provider_error"
        assert secret not in json.dumps(failed) and "[redacted]" in failed["error"]
        # A retry of the failed run id runs again (and succeeds once the server is back).
        model.fail_first = 0
        r = httpx.post(
            f"{c.base('plain')}/chat/completions",
            headers={"Authorization": f"Bearer {c.key}", "Idempotency-Key": "f-1"},
            json={"messages": [{"role": "user", "content": "hi"}]},
        )
        assert r.status_code == 200


def test_no_provider_configured_is_503(tmp_path: Path) -> None:
    ladders = tmp_path / "ladders"
    ladders.mkdir()
    write_ladder(ladders, "plain", "steps:\n  - id: reply\n")
    with running_cairn(tmp_path, ladders) as c:
        r = httpx.post(
            f"{c.base('plain')}/chat/completions",
            headers={"Authorization": f"Bearer {c.key}"},
            json={"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]},
        )
        assert r.status_code == 503
        assert r.json()["error"]["code"] == "provider_not_configured"


SLOW_LADDER = """
slates:
  - title: Memory
    folders:
      - name: facts
        tokenLimit: 500
        evictionPolicy: FIFO
        files:
          - { name: core.md, init: blank }
providers:
  fake: {kind: openai, baseUrl: "BASE", retries: 0}
models: {"*": fake}
steps:
  - id: answer
    fields:
      - { name: Question, type: text, from: input.context }
    slateWrite:
      to: { slate: Memory, folder: facts, file: core.md }
      field: fact
      match: {type: object, required: [fact]}
"""


def test_concurrent_retries_of_one_run_id_write_once(
    tmp_path: Path,
    fake_model: tuple[FakeModel, str],
) -> None:
    """Two requests with one Idempotency-Key at once: one runs, the other is refused with 409
    run_in_progress (or, if it comes after, replayed); the slate gets one entry."""
    import threading

    model, url = fake_model
    model.reply = lambda body: '{"fact": "written once"}'
    model.delay_s = 0.5
    ladders = tmp_path / "ladders"
    ladders.mkdir()
    write_ladder(ladders, "slow", SLOW_LADDER.replace("BASE", url))
    with running_cairn(tmp_path, ladders) as c:
        results: list[httpx.Response] = []

        def call() -> None:
            results.append(
                httpx.post(
                    f"{c.base('slow')}/chat/completions",
                    timeout=30,
                    headers={"Authorization": f"Bearer {c.key}", "Idempotency-Key": "same"},
                    json={"messages": [{"role": "user", "content": "go"}]},
                )
            )

        threads = [threading.Thread(target=call) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        statuses = sorted(r.status_code for r in results)
        assert statuses in ([200, 200], [200, 409]), [r.text for r in results]
        refused = [r for r in results if r.status_code == 409]
        assert all(r.json()["error"]["code"] == "run_in_progress" for r in refused)
        assert len(model.requests) == 1
        text = c.services.slates.read_file("tenant-a", "slow", "Memory", "facts", "core.md")
        assert text == "written once"


def test_streaming_errors_before_the_first_token_are_http_errors(tmp_path: Path) -> None:
    import openai

    ladders = tmp_path / "ladders"
    ladders.mkdir()
    write_ladder(
        ladders,
        "picky",
        """
providers:
  s: {kind: scripted, rules: [{contains: "magic", reply: "ok"}]}
models: {"*": s}
""",
    )
    with running_cairn(tmp_path, ladders) as c:
        client = openai.OpenAI(base_url=c.base("picky"), api_key=c.key, max_retries=0)
        with pytest.raises(openai.InternalServerError) as err:
            list(
                client.chat.completions.create(
                    model="m", stream=True, messages=[{"role": "user", "content": "no match"}]
                )
            )
        assert err.value.status_code == 502 and err.value.body["code"] == "provider_error"
        chunks = client.chat.completions.create(
            model="m", stream=True, messages=[{"role": "user", "content": "magic"}]
        )
        assert "".join(x.choices[0].delta.content or "" for x in chunks if x.choices) == "ok"


def test_a_provider_nobody_holds_closes_its_connection_pool() -> None:
    """A reload replaces providers while runs may still hold the old ones: an unreferenced
    provider's own HTTP client is closed when it is collected; a transport the caller passed
    in is the caller's and stays open (no reference cycle: the last ``del`` is enough)."""
    owned = OpenAIChatProvider("default", "http://127.0.0.1:9", timeout_s=1)
    owned_client = owned._client
    transport = httpx.MockTransport(lambda request: httpx.Response(500))
    lent = OpenAIChatProvider("default", "http://127.0.0.1:9", transport=transport)
    lent_client = lent._client
    assert not owned_client.is_closed and not lent_client.is_closed
    del owned, lent
    assert owned_client.is_closed
    assert not lent_client.is_closed


OPENAI_LADDER = """
providers:
  remote: {kind: openai, baseUrl: "http://127.0.0.1:9/v1"}
models: {"*": remote}
"""


def test_a_reload_releases_the_old_providers_and_close_the_serving_ones(
    tmp_path: Path,
) -> None:
    import gc

    from cairn.ladders.registry import LadderRegistry
    from tests.conftest import make_settings

    directory = tmp_path / "ladders"
    directory.mkdir()
    path = write_ladder(directory, "remote", OPENAI_LADDER)
    registry = LadderRegistry.load(make_settings(tmp_path, ladders_dir=directory))
    first = registry.get("remote").router.providers["remote"]
    old_client = first._client  # type: ignore[attr-defined]
    del first
    path.write_text(OPENAI_LADDER.replace(":9/", ":10/"))
    registry.reload()
    gc.collect()
    assert old_client.is_closed  # the replaced version's pool, once nothing holds it
    serving = registry.get("remote").router.providers["remote"]
    assert not serving.closed  # type: ignore[attr-defined]
    registry.close()
    assert serving.closed  # type: ignore[attr-defined]
    assert registry.names() == []
