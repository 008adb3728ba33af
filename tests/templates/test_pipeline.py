"""A template episode is an ordinary episode: it compiles into memories and reaches context,
all through the HTTP API (POST /v1/memories/compile, POST /v1/context)."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.templates.test_api import APPLY, SEED_REQUEST


def test_template_content_reaches_context_after_compile(backend_client: TestClient) -> None:
    ep = backend_client.post(APPLY, json=SEED_REQUEST).json()

    r = backend_client.post("/v1/memories/compile", json={"subject_id": "customer:globex"})
    assert r.status_code == 200, r.text
    compiled = r.json()
    assert compiled["memories_created"] >= 1
    memories = compiled["memories"]
    assert all(m["source_episode_ids"] == [ep["id"]] for m in memories)
    assert any("Duplicate charge on the May invoice" in m["content"] for m in memories)

    task = "Why was the customer charged twice on the invoice?"
    r = backend_client.post("/v1/context", json={"subject_id": "customer:globex", "task": task})
    assert r.status_code == 200, r.text
    bundle = r.json()
    assert "Duplicate charge on the May invoice" in bundle["assembled_context"]
    assert "Globex Corp" in bundle["assembled_context"]
    assert ep["id"] in bundle["provenance"]["source_episode_ids"]


def test_template_episodes_compile_like_plain_episodes(backend_client: TestClient) -> None:
    """The compiler does not know about templates: the same payload sent as a plain episode
    compiles to memories with the same content."""
    ep = backend_client.post(APPLY, json=SEED_REQUEST).json()
    plain = {key: ep[key] for key in ("source", "type", "payload", "metadata", "session_id")}
    backend_client.post("/v1/episodes", json={**plain, "subject_id": "customer:plain"})
    contents = []
    for subject in ("customer:globex", "customer:plain"):
        r = backend_client.post("/v1/memories/compile", json={"subject_id": subject})
        contents.append(sorted(m["content"] for m in r.json()["memories"]))
    assert contents[0] == contents[1] and contents[0]
