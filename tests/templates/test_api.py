"""``/v1/memory-templates`` through the real ASGI app, on SQLite and PostgreSQL."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from cairn.app import create_app
from cairn.services import Services
from tests.conftest import make_settings
from tests.templates.helpers import SIXTH, write_yaml

APPLY = "/v1/memory-templates/customer-support-handoff/apply"

# The seed's apply request, verbatim.
SEED_REQUEST = {
    "subject_id": "customer:globex",
    "session_id": "ticket-8842",
    "values": {
        "customer": "Globex Corp",
        "issue": "Duplicate charge on the May invoice",
        "next_owner": "Tier 2 billing",
    },
}

SEED_CONTENT = (
    "Customer support handoff — Globex Corp.\n\n"
    "Active issue: Duplicate charge on the May invoice\n\n"
    "Steps taken so far: \n\n"
    "Next owner: Tier 2 billing"
)


def episodes_of(client: TestClient, subject: str, headers: dict[str, str] | None = None) -> list:
    r = client.get("/v1/timeline", params={"subject_id": subject}, headers=headers or {})
    assert r.status_code == 200, r.text
    return list(r.json()["episodes"])


def test_seed_apply_request_works_verbatim(backend_client: TestClient) -> None:
    r = backend_client.post(APPLY, json=SEED_REQUEST)
    assert r.status_code == 201, r.text
    ep = r.json()
    assert ep["subject_id"] == "customer:globex"
    assert ep["session_id"] == "ticket-8842"
    assert ep["type"] == "support.handoff_note"
    assert ep["source"] == "memory-template"
    assert ep["payload"] == {
        "template_id": "customer-support-handoff",
        "template_version": 1,
        "fields": SEED_REQUEST["values"],  # exactly what was supplied; steps_taken absent
        "content": SEED_CONTENT,
    }
    assert ep["payload"]["content"].startswith("Customer support handoff — Globex Corp.\n\nActive")
    assert ep["metadata"] == {"template": {"id": "customer-support-handoff", "version": 1}}
    # It is an ordinary episode: the timeline shows it with the same provenance.
    (stored,) = episodes_of(backend_client, "customer:globex")
    assert stored["id"] == ep["id"]
    assert stored["payload"] == ep["payload"] and stored["metadata"] == ep["metadata"]


def test_list_and_get_show_the_full_schema(client: TestClient) -> None:
    r = client.get("/v1/memory-templates")
    assert r.status_code == 200
    templates = r.json()["templates"]
    assert [t["id"] for t in templates] == sorted(
        [
            "account-onboarding",
            "customer-support-handoff",
            "incident-summary",
            "project-decision",
            "user-preference",
        ]
    )
    one = client.get("/v1/memory-templates/customer-support-handoff").json()
    assert one == next(t for t in templates if t["id"] == "customer-support-handoff")
    assert set(one) == {
        "id",
        "version",
        "title",
        "description",
        "episode_type",
        "fields",
        "content_template",
    }
    assert one["fields"][0] == {
        "name": "customer",
        "type": "string",
        "required": True,
        "description": "The customer (person or account) being handed off.",
    }
    assert one["content_template"].startswith("Customer support handoff — {customer}.")


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/v1/memory-templates/no-such-template"),
        ("post", "/v1/memory-templates/no-such-template/apply"),
        ("get", "/v1/memory-templates/" + "x" * 300),
        ("get", "/v1/memory-templates/Has%20Space"),
    ],
)
def test_unknown_template_is_404(client: TestClient, method: str, path: str) -> None:
    kwargs: dict[str, Any] = {"json": SEED_REQUEST} if method == "post" else {}
    r = getattr(client, method)(path, **kwargs)
    assert r.status_code == 404
    err = r.json()["error"]
    assert err["code"] == "template_not_found"
    assert err["details"]["template_id"] == path.split("/")[3].replace("%20", " ")
    assert episodes_of(client, "customer:globex") == []


@pytest.mark.parametrize("body", [b"garbage", b"{}", b'{"subject_id": "a/b"}'])
def test_unknown_template_is_404_whatever_the_body(client: TestClient, body: bytes) -> None:
    """The template's absence comes first (a bad body of a known template stays 422)."""
    headers = {"Content-Type": "application/json"}
    r = client.post("/v1/memory-templates/no-such-template/apply", content=body, headers=headers)
    assert r.status_code == 404 and r.json()["error"]["code"] == "template_not_found"
    known = "/v1/memory-templates/customer-support-handoff/apply"
    r = client.post(known, content=body, headers=headers)
    assert r.status_code == 422 and r.json()["error"]["code"] == "validation_error"


def _values(**changes: Any) -> dict[str, Any]:
    body = copy.deepcopy(SEED_REQUEST)
    for name, value in changes.items():
        if value is ...:
            del body["values"][name]
        else:
            body["values"][name] = value
    return body


VALUE_ERRORS = [
    ("unknown field", _values(priority="high"), "template_unknown_field", "priority"),
    ("misspelt field", _values(custommer="x"), "template_unknown_field", "custommer"),
    ("missing required", _values(issue=...), "template_missing_field", "issue"),
    ("missing both", _values(issue=..., customer=...), "template_missing_field", "customer"),
    ("number", _values(customer=42), "template_invalid_value", "customer"),
    ("float", _values(issue=1.5), "template_invalid_value", "issue"),
    ("boolean", _values(next_owner=True), "template_invalid_value", "next_owner"),
    ("null", _values(steps_taken=None), "template_invalid_value", "steps_taken"),
    ("array", _values(issue=["a", "b"]), "template_invalid_value", "issue"),
    ("object", _values(customer={"name": "Globex"}), "template_invalid_value", "customer"),
]


def test_nul_in_a_value_is_refused_at_the_edge(backend_client: TestClient) -> None:
    r = backend_client.post(APPLY, json=_values(issue="a\x00b"))
    assert r.status_code == 422
    err = r.json()["error"]
    assert err["code"] == "validation_error"
    assert err["details"][0]["field"] == "values.issue"
    assert backend_client.get("/v1/subjects").json()["total"] == 0


@pytest.mark.parametrize(
    ("case", "body", "code", "field"), VALUE_ERRORS, ids=[c[0] for c in VALUE_ERRORS]
)
def test_value_errors_have_distinct_codes_and_write_nothing(
    backend_client: TestClient, case: str, body: dict[str, Any], code: str, field: str
) -> None:
    r = backend_client.post(APPLY, json=body)
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["code"] == code
    assert err["details"]["field"] == field
    assert err["details"]["template_id"] == "customer-support-handoff"
    assert f"'{field}'" in err["message"]
    assert episodes_of(backend_client, "customer:globex") == []
    assert backend_client.get("/v1/subjects").json()["total"] == 0


def test_error_details_list_every_offending_field(client: TestClient) -> None:
    r = client.post(APPLY, json=_values(a="1", b="2"))
    assert r.json()["error"]["details"]["fields"] == ["a", "b"]
    r = client.post(APPLY, json={"subject_id": "s", "values": {}})
    assert r.json()["error"]["details"]["fields"] == ["customer", "issue"]
    r = client.post(APPLY, json=_values(customer=1, issue=None))
    details = r.json()["error"]["details"]
    assert details["fields"] == ["customer", "issue"]
    assert details["types"] == {"customer": "number", "issue": "null"}


def test_unknown_field_is_reported_before_other_problems(client: TestClient) -> None:
    r = client.post(APPLY, json={"subject_id": "s", "values": {"zzz": 1}})
    assert r.json()["error"]["code"] == "template_unknown_field"
    r = client.post(APPLY, json={"subject_id": "s", "values": {"customer": 1}})
    assert r.json()["error"]["code"] == "template_invalid_value"


@pytest.mark.parametrize(
    "body",
    [
        {**SEED_REQUEST, "subject_id": "bad/subject"},
        {**SEED_REQUEST, "subject_id": ""},
        {**SEED_REQUEST, "subject_id": "x" * 257},
        {k: v for k, v in SEED_REQUEST.items() if k != "subject_id"},
        {k: v for k, v in SEED_REQUEST.items() if k != "values"},
        {**SEED_REQUEST, "values": "customer=Globex"},
        {**SEED_REQUEST, "values": ["Globex"]},
        {**SEED_REQUEST, "session_id": ""},
        {**SEED_REQUEST, "idempotency_key": ""},
        {**SEED_REQUEST, "idempotency_key": "k\x00"},
        {**SEED_REQUEST, "session_id": "s\x00"},
        {**SEED_REQUEST, "occurred_at": "yesterday"},
        {**SEED_REQUEST, "metadata": {"x": 1}},
        {**SEED_REQUEST, "type": "other.type"},
    ],
)
def test_request_shape_is_validated_like_episodes(client: TestClient, body: dict) -> None:
    r = client.post(APPLY, json=body)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["code"] == "validation_error"
    assert client.get("/v1/subjects").json()["total"] == 0


def test_malformed_json_is_a_clean_4xx(client: TestClient) -> None:
    r = client.post(APPLY, content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 422
    assert r.json()["error"]["code"] == "validation_error"


def test_omitted_optional_fields_are_absent_and_render_empty(client: TestClient) -> None:
    body = {"subject_id": "u1", "values": {"subject": "reply language", "preference": "Dutch"}}
    ep = client.post("/v1/memory-templates/user-preference/apply", json=body).json()
    assert ep["type"] == "profile.preference"
    assert ep["payload"]["fields"] == body["values"]
    assert "rationale" not in ep["payload"]["fields"]
    assert ep["payload"]["content"] == "User preference about reply language: Dutch\n\nRationale: "
    assert ep["session_id"] is None


def test_empty_string_is_a_supplied_value(client: TestClient) -> None:
    ep = client.post(APPLY, json=_values(steps_taken="")).json()
    assert ep["payload"]["fields"]["steps_taken"] == ""


def test_values_are_inserted_literally_single_pass(backend_client: TestClient) -> None:
    tricky = "{issue} and {{customer}} and {next_owner"
    body = _values(customer=tricky, issue="{customer}")
    ep = backend_client.post(APPLY, json=body).json()
    assert ep["payload"]["content"].startswith(
        f"Customer support handoff — {tricky}.\n\nActive issue: {{customer}}\n\n"
    )
    assert ep["payload"]["fields"]["customer"] == tricky


def test_same_values_same_bytes(client: TestClient) -> None:
    a = client.post(APPLY, json=SEED_REQUEST).json()
    b = client.post(APPLY, json={**SEED_REQUEST, "subject_id": "customer:other"}).json()
    assert a["id"] != b["id"]
    assert a["payload"]["content"].encode() == b["payload"]["content"].encode()
    assert a["payload"]["content"] == SEED_CONTENT


def test_idempotency_key_returns_the_original(backend_client: TestClient) -> None:
    body = {**SEED_REQUEST, "idempotency_key": "handoff-8842"}
    first = backend_client.post(APPLY, json=body)
    again = backend_client.post(
        APPLY, json=_values(next_owner="someone else") | {"idempotency_key": "handoff-8842"}
    )
    assert first.status_code == again.status_code == 201
    assert again.json()["id"] == first.json()["id"]
    assert again.json()["payload"]["fields"]["next_owner"] == "Tier 2 billing"
    assert again.json()["idempotency_key"] == "handoff-8842"
    assert len(episodes_of(backend_client, "customer:globex")) == 1


def test_occurred_at_is_kept_in_utc(client: TestClient) -> None:
    body = {**SEED_REQUEST, "occurred_at": "2026-05-03T10:00:00+02:00"}
    ep = client.post(APPLY, json=body).json()
    assert ep["occurred_at"].startswith("2026-05-03T08:00:00")


def test_apply_writes_into_the_callers_tenant_only(
    backend_client: TestClient, two_tenants: dict[str, str]
) -> None:
    a = {"X-API-Key": two_tenants["a"]}
    b = {"X-API-Key": two_tenants["b"]}
    assert backend_client.post(APPLY, json=SEED_REQUEST).status_code == 401
    assert backend_client.get("/v1/memory-templates").status_code == 401
    r = backend_client.post(APPLY, json=SEED_REQUEST, headers=a)
    assert r.status_code == 201
    assert len(episodes_of(backend_client, "customer:globex", a)) == 1
    assert episodes_of(backend_client, "customer:globex", b) == []
    # Same idempotency key in another tenant is a different episode.
    keyed = {**SEED_REQUEST, "idempotency_key": "k1"}
    ra = backend_client.post(APPLY, json=keyed, headers=a).json()
    rb = backend_client.post(APPLY, json=keyed, headers=b).json()
    assert ra["id"] != rb["id"]
    r = backend_client.post(APPLY, json=SEED_REQUEST, headers={**a, "X-Tenant-ID": "tenant-b"})
    assert r.status_code == 403


@pytest.fixture
def operator_client(tmp_path: Path) -> Iterator[TestClient]:
    write_yaml(tmp_path / "ops", "sales.yaml", SIXTH)
    settings = make_settings(tmp_path, template_dirs=[tmp_path / "ops"])
    services = Services.from_settings(settings)
    with TestClient(create_app(services=services)) as c:
        yield c
    services.close()


def test_operator_template_is_served_and_applied(operator_client: TestClient) -> None:
    ids = [t["id"] for t in operator_client.get("/v1/memory-templates").json()["templates"]]
    assert len(ids) == 6 and "sales-call-note" in ids
    r = operator_client.post(
        "/v1/memory-templates/sales-call-note/apply",
        json={"subject_id": "acct:acme", "values": {"account": "Acme", "summary": "Renewal"}},
    )
    assert r.status_code == 201, r.text
    ep = r.json()
    assert ep["type"] == "sales.call_note"
    assert ep["metadata"]["template"] == {"id": "sales-call-note", "version": 2}
    assert ep["payload"]["template_version"] == 2
    assert ep["payload"]["content"] == "Sales call with Acme: Renewal\nNext step: \n{draft}"


def test_openapi_documents_the_endpoints(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert "/v1/memory-templates" in paths
    assert "/v1/memory-templates/{template_id}" in paths
    assert "post" in paths["/v1/memory-templates/{template_id}/apply"]


def test_concurrent_applies_with_one_key_make_one_episode(backend_client: TestClient) -> None:
    import threading

    body = {**SEED_REQUEST, "idempotency_key": "race"}
    ids: list[str] = []
    errors: list[BaseException] = []

    def post() -> None:
        try:
            r = backend_client.post(APPLY, json=body)
            assert r.status_code == 201, r.text
            ids.append(r.json()["id"])
        except BaseException as exc:  # collected: a thread's failure must fail the test
            errors.append(exc)

    threads = [threading.Thread(target=post) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(set(ids)) == 1 and len(ids) == 6
    assert len(episodes_of(backend_client, "customer:globex")) == 1
