"""Schemathesis over ``/openapi.json`` on both backends: generated requests (valid and invalid)
for every operation, a bounded number each, and every answer checked against the description:
no server error, a status the operation lists, the declared content type, headers and body
schema, invalid data refused. The spec must describe what the server really does."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode, checks

from cairn.app import create_app
from tests.api.test_no_500 import build_services
from tests.conftest import database_url

CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
    checks.response_headers_conformance,
    checks.negative_data_rejection,
    checks.unsupported_method,
]


EXAMPLES = 5  # per operation and generation mode: bounded, so both backends stay quick


def run_operation(operation: Any, mode: GenerationMode, found: dict[str, None]) -> None:
    """Up to EXAMPLES generated cases of one operation; each failing check's first lines."""

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    def one(case: Any) -> None:
        try:
            case.call_and_validate(checks=CHECKS)
        except (Exception, BaseExceptionGroup) as exc:  # a failed check: record, go on
            head = " | ".join(str(exc).strip().splitlines()[:3])
            found[f"{operation.label} [{mode.value}]: {head[:400]}"] = None

    # Unsatisfiable: nothing to make invalid (no parameters, no body); positive cases cover it.
    with contextlib.suppress(Unsatisfiable):
        one()


# Keys of a parameter's schema that only describe it; any other key constrains its values.
ANNOTATIONS = {"title", "description", "examples", "example", "deprecated"}


def nothing_to_negate(raw: dict[str, Any]) -> bool:
    """Whether no request of the operation can be invalid: no body, and only path parameters
    of plain string type (every text is a valid value, and a path segment is always text).
    Negative generation then finds no case and ends in Unsatisfiable after some fifty rejected
    draws: more than half of this module's time, measured, for no request sent."""
    if "requestBody" in raw:
        return False
    return all(
        param.get("in") == "path"
        and param.get("schema", {}).get("type") == "string"
        and set(param.get("schema", {})) <= ANNOTATIONS | {"type"}
        for param in raw.get("parameters", [])
    )


def failures_of(app: Any) -> list[str]:
    """Every operation's generated cases, positive and negative; the distinct failures."""
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    found: dict[str, None] = {}
    for result in schema.get_all_operations():
        operation = result.ok()
        for mode in GenerationMode:
            if mode == GenerationMode.NEGATIVE and nothing_to_negate(operation.definition.raw):
                continue
            run_operation(operation, mode, found)
    return list(found)


@pytest.mark.slow
def test_openapi_matches_behaviour(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    services = build_services(tmp_path, database_url(backend, tmp_path, request))
    try:
        failures = failures_of(create_app(services=services))
    finally:
        services.close()
    assert not failures, "\n".join(failures[:30]) + f"\n({len(failures)} failing cases)"


def test_options_and_405_list_every_method_of_the_path(backend_client: Any) -> None:
    r = backend_client.options("/v1/slates/memory-ladder/Memory/facts/core.md")
    assert r.status_code == 204
    assert r.headers["allow"] == "DELETE, GET, HEAD, OPTIONS, POST"
    put = backend_client.put("/v1/slates/memory-ladder/Memory/facts/core.md", json={})
    assert put.status_code == 405 and put.headers["allow"] == r.headers["allow"]
    assert backend_client.options("/v1/episodes").headers["allow"] == "OPTIONS, POST"
    assert backend_client.options("/v1/no-such-route").status_code == 404


def test_head_answers_as_get_without_the_body(backend_client: Any) -> None:
    for path in ("/healthz", "/v1/subjects", "/v1/subjects/nobody/timeline"):
        get, head = backend_client.get(path), backend_client.head(path)
        assert head.status_code == get.status_code, path
        assert head.content == b"" and head.headers["content-type"] == get.headers["content-type"]
        if get.status_code == 200:  # (an error's body carries its own request id)
            assert head.headers["content-length"] == str(len(get.content)), path
    # The metrics name a HEAD's route, as a GET's.
    metrics = backend_client.get("/metrics").text
    assert 'cairn_http_requests_total{method="HEAD",route="/v1/subjects",status="200"}' in metrics
    # Where there is no GET, HEAD is still a 405 listing what there is.
    r = backend_client.head("/v1/episodes")
    assert r.status_code == 405 and r.headers["allow"] == "OPTIONS, POST"


def test_every_operation_lists_its_error_statuses(backend_client: Any) -> None:
    spec = backend_client.get("/openapi.json").json()
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            listed = set(operation["responses"])
            assert {"400", "404", "422", "503"} <= listed, (method, path, listed)
            if method != "get":
                assert {"409", "413"} <= listed, (method, path, listed)
            if path.startswith("/v1/") and path != "/v1/version":
                assert {"401", "403"} <= listed, (method, path, listed)


def test_every_path_template_declares_its_parameters(backend_client: Any) -> None:
    """A ``{name}`` in a path is a declared path parameter of every operation on it (the
    not-supported routes declared none: an invalid document, which schemathesis refuses)."""
    import re

    spec = backend_client.get("/openapi.json").json()
    undeclared = []
    for path, operations in spec["paths"].items():
        names = set(re.findall(r"\{(\w+)\}", path))
        for method, op in operations.items():
            declared = {p["name"] for p in op.get("parameters", []) if p["in"] == "path"}
            if names != declared:
                undeclared.append((method, path, sorted(names - declared)))
    assert undeclared == []
    assert "/v1/receipts/{receipt_id}/verify" in spec["paths"]


def test_head_over_a_real_server_logs_no_error(
    client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Through uvicorn, a HEAD answered as its GET: uvicorn reads the scope's method to know
    no body follows the content-length; as GET it logged every HEAD as an unhandled error
    ("Response content shorter than Content-Length")."""
    import logging

    import httpx

    from tests.client.conftest import live_server

    with caplog.at_level(logging.WARNING), live_server(client.app) as base:
        for path in ("/healthz", "/v1/subjects", "/ui/subjects", "/v1/version"):
            get, head = httpx.get(base + path), httpx.head(base + path)
            assert head.status_code == get.status_code == 200, (path, head.status_code)
            assert head.headers["content-length"] == get.headers["content-length"]
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == []
