"""A template episode is an ordinary episode: it compiles into memories and reaches context."""

from __future__ import annotations

from fastapi.testclient import TestClient

from cairn.core.scope import Scope
from cairn.engine.compile import compile_scope
from cairn.services import Services
from tests.templates.test_api import APPLY, SEED_REQUEST


def test_template_content_reaches_context_after_compile(
    backend_client: TestClient, backend_services: Services
) -> None:
    ep = backend_client.post(APPLY, json=SEED_REQUEST).json()
    result = compile_scope(backend_services, "default", Scope.for_subject("customer:globex"))
    assert result.memories_created >= 1

    timeline = backend_client.get("/v1/timeline", params={"subject_id": "customer:globex"}).json()
    memories = timeline["memories"]
    assert memories and all(m["source_episode_ids"] == [ep["id"]] for m in memories)
    assert any("Duplicate charge on the May invoice" in m["content"] for m in memories)

    r = backend_client.post(
        "/v1/context",
        json={
            "subject_id": "customer:globex",
            "task": "Why was the customer charged twice on the invoice?",
        },
    )
    assert r.status_code == 200, r.text
    bundle = r.json()
    assert "Duplicate charge on the May invoice" in bundle["assembled_context"]
    assert ep["id"] in bundle["provenance"]["source_episode_ids"]
