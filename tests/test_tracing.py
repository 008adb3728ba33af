"""OpenTelemetry spans (the otel extra): one server span per HTTP request, named after its route
template, with the context lanes and compile steps it ran as its children; nothing of the SDK
is imported while tracing is off."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from cairn.app import create_app
from cairn.errors import ConfigError
from cairn.services import Services
from cairn.tracing import Tracing
from tests.conftest import make_settings

LANES = ["recent", "summary", "documents", "long_term", "pack"]


@pytest.fixture
def traced(db_url: str, tmp_path: Path) -> Iterator[tuple[TestClient, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    services = Services.from_settings(make_settings(tmp_path, database_url=db_url))
    services.metrics.tracing = Tracing(provider)
    try:
        with TestClient(create_app(services=services)) as c:
            yield c, exporter
    finally:
        services.close()


def _one(spans: list[Any], name: str) -> Any:
    found = [s for s in spans if s.name == name]
    assert len(found) == 1, [s.name for s in spans]
    return found[0]


def _children(spans: list[Any], parent: Any) -> list[str]:
    return [
        s.name
        for s in sorted(spans, key=lambda s: s.start_time)
        if s.parent is not None and s.parent.span_id == parent.context.span_id
    ]


def test_a_request_span_holds_its_lanes_and_compile_steps(
    traced: tuple[TestClient, InMemorySpanExporter],
) -> None:
    client, exporter = traced
    episode = {
        "subject_id": "ana",
        "source": "chat",
        "type": "conversation.turn",
        "session_id": "s1",
        "payload": {"messages": [{"role": "user", "content": "Я живу в Казани."}]},
    }
    assert client.post("/v1/episodes", json=episode).status_code == 201
    assert client.post("/v1/memories/compile", json={"subject_id": "ana"}).status_code == 200
    body = {"subject_id": "ana", "task": "Где живёт Ана?", "session_id": "s1"}
    assert client.post("/v1/context", json=body).status_code == 200
    spans = list(exporter.get_finished_spans())

    context = _one(spans, "POST /v1/context")
    assert context.kind == SpanKind.SERVER and context.parent is None
    assert context.attributes["http.route"] == "/v1/context"
    assert context.attributes["http.request.method"] == "POST"
    assert context.attributes["http.response.status_code"] == 200
    assert context.attributes["cairn.tenant"] == "default"
    assert _children(spans, context) == [f"cairn.context.{lane}" for lane in LANES]
    assert {s.context.trace_id for s in spans if s.name.startswith("cairn.context.")} == {
        context.context.trace_id
    }

    compile_span = _one(spans, "POST /v1/memories/compile")
    step = _one(spans, "cairn.compile.step")
    assert step.parent.span_id == compile_span.context.span_id
    assert _children(spans, step) == [
        "cairn.compile.read",
        "cairn.compile.plan",
        "cairn.compile.write",
    ]
    assert step.attributes["cairn.episodes_compiled"] == 1
    assert step.attributes["cairn.memories_created"] >= 1


def test_a_span_names_the_route_template_and_marks_server_errors(
    traced: tuple[TestClient, InMemorySpanExporter],
) -> None:
    client, exporter = traced
    job = "0193c8e0-0000-7000-8000-000000000000"
    assert client.get(f"/v1/memories/compile/{job}").status_code == 404
    assert client.get("/v1/no/such/route").status_code == 404
    spans = list(exporter.get_finished_spans())
    span = _one(spans, "GET /v1/memories/compile/{job_id}")
    assert span.attributes["url.path"] == f"/v1/memories/compile/{job}"
    assert span.attributes["http.response.status_code"] == 404
    assert span.status.status_code != StatusCode.ERROR  # a client's error is not the server's
    missing = _one(spans, "GET <unmatched>")
    assert missing.attributes["http.response.status_code"] == 404
    failed = Tracing(TracerProvider())
    with failed.request_span("GET") as s:
        failed.finish_request(s, "GET", "/x", "/x", 503, "t")
        assert s.status.status_code == StatusCode.ERROR


def test_tracing_is_off_unless_configured_and_imports_no_sdk_then(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from fastapi.testclient import TestClient\n"
        "from cairn.app import create_app\n"
        "from cairn.config import Settings\n"
        "with TestClient(create_app(Settings())) as c:\n"
        "    r = c.post('/v1/context', json={'subject_id': 'a', 'task': 'x'})\n"
        "    assert r.status_code == 200\n"
        "    assert not c.app.state.metrics.tracing.enabled\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry.sdk')))\n"
    )
    env = {"CAIRN_DATA_DIR": str(tmp_path / "data"), "CAIRN_EMBEDDER": "none"}
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert out.stdout.strip() == "[]", out.stderr


def test_the_exporter_comes_from_the_otel_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    assert not Tracing.from_environment(False).enabled
    for name in ("otlp", "console", "none"):
        monkeypatch.setenv("OTEL_TRACES_EXPORTER", name)
        monkeypatch.setenv("OTEL_SERVICE_NAME", "cairn-test")
        tracing = Tracing.from_environment(True)
        assert tracing.enabled
        assert tracing.provider.resource.attributes["service.name"] == "cairn-test"
        tracing.shutdown()
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "zipkin")
    with pytest.raises(ConfigError, match="OTEL_TRACES_EXPORTER='zipkin'"):
        Tracing.from_environment(True)
