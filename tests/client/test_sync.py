"""Every method of the sync SDK, through the real app in-process."""

from __future__ import annotations

import json
import uuid

import pytest

from cairn.client import (
    AuthenticationError,
    Cairn,
    ConflictError,
    EpisodeCreate,
    InvalidRequestError,
    NotFoundError,
)
from cairn.config import Settings
from cairn.core.scope import Scope as CoreScope
from cairn.services import Services


def test_health_ready_version(local: Cairn) -> None:
    assert local.health().status == "ok"
    assert local.ready().status == "ready"
    version = local.version()
    assert version.version and version.database == "sqlite"


def test_episode_create_is_idempotent_by_key(local: Cairn) -> None:
    first = local.episodes.create(
        "user-1",
        source="chat",
        type="message",
        payload={"text": "I prefer tea"},
        idempotency_key="k-1",
        metadata={"lang": "en"},
    )
    again = local.episodes.create(
        "user-1",
        source="chat",
        type="message",
        payload={"text": "something else"},
        idempotency_key="k-1",
    )
    assert isinstance(first.id, uuid.UUID)
    assert again.id == first.id and again.payload == {"text": "I prefer tea"}
    assert first.metadata == {"lang": "en"}
    assert len(local.timeline("user-1").episodes) == 1


def test_batch_timeline_subjects_and_delete(local: Cairn) -> None:
    batch = local.episodes.create_many(
        [
            EpisodeCreate(subject_id="user-2", source="s", type="t", payload={"n": i})
            for i in range(3)
        ]
        + [{"subject_id": "user-3", "source": "s", "type": "t", "payload": {}}]
    )
    assert batch.episodes_created == 4
    timeline = local.timeline("user-2", limit=2)
    assert [e.payload["n"] for e in timeline.episodes] == [0, 1]
    assert timeline.episodes_has_more is True
    assert local.timeline("user-2", limit=2, offset=2).episodes[0].payload == {"n": 2}
    newest = local.timeline("user-2", limit=2, newest_first=True)
    assert [e.payload["n"] for e in newest.episodes] == [1, 2]  # the newest window, in time order
    listing = local.subjects.list(prefix="user-")
    assert {(s.subject_id, s.episode_count) for s in listing.subjects} == {
        ("user-2", 3),
        ("user-3", 1),
    }
    assert listing.total == 2
    deleted = local.subjects.delete("user-2")
    assert (deleted.subject_id, deleted.episodes_deleted) == ("user-2", 3)
    assert local.subjects.list().total == 1


def test_errors_carry_code_status_and_request_id(local: Cairn) -> None:
    with pytest.raises(InvalidRequestError) as info:
        local.timeline("not/a valid id")
    err = info.value
    assert (err.status, err.code) == (422, "validation_error")
    assert err.request_id and len(err.request_id) >= 8
    assert err.details[0]["field"] == "subject_id"
    with pytest.raises(InvalidRequestError) as batch_info:
        local.request(
            "POST",
            "/v1/episodes/batch",
            json={
                "episodes": [
                    {"subject_id": "ok", "source": "s", "type": "t", "payload": {}},
                    {"subject_id": "ok", "source": "", "type": "t", "payload": {}},
                ]
            },
        )
    assert batch_info.value.details[0]["field"].startswith("episodes.1")
    assert local.subjects.list().total == 0  # nothing of the bad batch was written
    with pytest.raises(NotFoundError) as nf:
        local.request("GET", "/v1/nowhere")
    assert nf.value.code == "not_found"


def test_client_side_validation_fails_before_sending(local: Cairn) -> None:
    with pytest.raises(ValueError):
        local.episodes.create("bad/id!", source="s", type="t", payload={})
    assert local.subjects.list().total == 0


def test_auth_errors(tmp_path, sdk_settings: Settings) -> None:
    services = Services.from_settings(sdk_settings)
    key, _ = services.store.keys.create("acme")
    try:
        with Cairn.local(services=services, api_key="") as anonymous:
            with pytest.raises(AuthenticationError) as info:
                anonymous.subjects.list()
            assert (info.value.status, info.value.code) == (401, "missing_api_key")
        with Cairn.local(services=services, api_key="wrong") as wrong:
            with pytest.raises(AuthenticationError) as info:
                wrong.subjects.list()
            assert (info.value.status, info.value.code) == (403, "invalid_api_key")
        with Cairn.local(services=services, api_key=key) as acme:
            acme.episodes.create("u", source="s", type="t", payload={})
            assert acme.subjects.list().total == 1
    finally:
        services.close()


def test_templates(local: Cairn) -> None:
    ids = [t.id for t in local.templates.list()]
    assert "user-preference" in ids and ids == sorted(ids)
    template = local.templates.get("user-preference")
    assert template.episode_type == "profile.preference"
    assert {f.name for f in template.fields if f.required} >= {"preference"}
    episode = local.templates.apply(
        "user-preference",
        "user-9",
        {"subject": "drinks", "preference": "green tea"},
        session_id="s-1",
        idempotency_key="pref-1",
    )
    assert episode.type == "profile.preference"
    assert episode.payload["template_id"] == "user-preference"
    assert episode.metadata["template"]["id"] == "user-preference"
    again = local.templates.apply(
        "user-preference",
        "user-9",
        {"subject": "drinks", "preference": "green tea"},
        idempotency_key="pref-1",
    )
    assert again.id == episode.id
    with pytest.raises(NotFoundError) as info:
        local.templates.get("no-such-template")
    assert info.value.code == "template_not_found"
    with pytest.raises(InvalidRequestError) as bad:
        local.templates.apply("user-preference", "user-9", {"nope": "x"})
    assert bad.value.code.startswith("template_")


def test_context_returns_a_recorded_episode(local: Cairn) -> None:
    local.episodes.create(
        "user-4",
        source="chat",
        type="message",
        session_id="conv-1",
        payload={"text": "I prefer green tea in the morning"},
    )
    bundle = local.context(
        "user-4", "what does the user drink?", session_id="conv-1", max_tokens=500
    )
    assert "green tea" in bundle.assembled_context
    assert [e.payload["text"] for e in bundle.episodes] == ["I prefer green tea in the morning"]
    assert 0 < bundle.token_estimate <= 500


def test_scopes_turns_documents_and_context(local: Cairn) -> None:
    scope = {"runtime_id": "app", "user_id": "u-1", "agent_id": "assistant"}
    turn = local.scopes.commit_turn(
        scope, "conv-1", "run-1", [{"role": "user", "content": "My cat is called Miso"}]
    )
    assert turn.created is True
    repeat = local.scopes.commit_turn(
        scope, "conv-1", "run-1", [{"role": "user", "content": "My cat is called Miso"}]
    )
    assert (repeat.created, repeat.episode_id) == (False, turn.episode_id)
    doc = local.scopes.put_document(
        scope, "docs", "d-1", "Cats like warm places.", title="Cats", idempotency_key="d-1"
    )
    assert doc.created and doc.chunk_count >= 1
    ctx = local.scopes.context(
        scope, "cat name", conversation_id="conv-1", render=True, budget={"max_tokens": 400}
    )
    assert any("Miso" in item.content for item in ctx.items)
    assert ctx.rendered and "Miso" in ctx.rendered
    other = local.scopes.context(
        {"runtime_id": "app", "user_id": "u-2"}, "cat", conversation_id="conv-1"
    )
    assert other.items == []  # another user's partition sees nothing
    # The contracts' own Scope (seed 001) is a scope to the SDK too.
    core = CoreScope(runtime_id="app", user_id="u-1", agent_id="assistant")
    assert local.scopes.context(core, "cat name", conversation_id="conv-1").items == ctx.items
    gone = local.scopes.delete_document(scope, "docs", "d-1")
    assert (gone.documents_deleted, gone.chunks_deleted) == (1, doc.chunk_count)
    ctx = local.scopes.context(scope, "warm places", dataset_ids=["docs"])
    assert not any("warm" in item.content for item in ctx.items)
    with pytest.raises(NotFoundError) as info:
        local.scopes.delete_document(scope, "docs", "d-1")
    assert info.value.code == "document_not_found"


def test_slates(local: Cairn) -> None:
    [instance] = local.slates.list(ladder="notes").slates
    assert (instance.slate, instance.tokenLimit) == ("Memory", 12)
    written = local.slates.write(
        "notes", "Memory", "facts", "core.md", "the sky is blue", tags=["sky"]
    )
    assert written.written and written.usage and written.usage["tokens"] > 0
    assert local.slates.read("notes", "Memory", "facts", "core.md") == "the sky is blue"
    assert local.slates.metatag("notes", "Memory", "facts", "core.md", "tags") is not None
    tree = local.slates.tree("notes", "Memory")
    assert tree["folders"][0]["folder"] == "facts"
    # Over the 12-token limit, FIFO evicts the oldest entry.
    local.slates.write(
        "notes", "Memory", "facts", "core.md", "grass is green and wet today and the birds sing"
    )
    evictions = local.slates.evictions("notes", "Memory")
    assert [e.preview for e in evictions.evictions][:1] == ["the sky is blue"]
    skipped = local.slates.write(
        "notes",
        "Memory",
        "facts",
        "core.md",
        "no json here",
        match={"type": "object", "required": ["fact"]},
        field="fact",
    )
    assert skipped.written is False and skipped.reason
    assert local.slates.delete("notes", "Memory", "facts", "core.md")["entries_deleted"] >= 1
    assert local.slates.reset("notes", "Memory", "facts")["reset"] is True
    assert local.slates.read("notes", "Memory", "facts", "core.md") == ""
    with pytest.raises(NotFoundError):
        local.slates.read("notes", "Nope", "facts", "core.md")


def test_ladders_and_runs(local: Cairn) -> None:
    assert [m.id for m in local.ladders.models().data] == ["notes"]
    reply = local.ladders.chat(
        "notes", [{"role": "user", "content": "hi"}], idempotency_key="run-a", conversation_id="c-1"
    )
    assert reply.text == "echo!"
    replay = local.ladders.chat(
        "notes", [{"role": "user", "content": "hi"}], idempotency_key="run-a", conversation_id="c-1"
    )
    assert replay.id == reply.id
    with pytest.raises(ConflictError) as reused:
        local.ladders.chat("notes", [{"role": "user", "content": "other"}], idempotency_key="run-a")
    assert reused.value.code == "idempotency_key_reused"
    chunks = list(local.ladders.stream("notes", [{"role": "user", "content": "hello"}]))
    assert "".join(c.text for c in chunks) == "echo!"
    with pytest.raises(NotFoundError):
        list(local.ladders.stream("missing", [{"role": "user", "content": "hi"}]))
    runs = local.runs.list(ladder="notes")
    assert runs.total == 2 and {r.status for r in runs.runs} == {"completed"}
    run = local.runs.get(reply.id.removeprefix("chatcmpl-"))
    assert run.response["choices"][0]["message"]["content"] == "echo!"
    # A conversation id in another script (an HTTP header carries ASCII only) arrives whole.
    other = local.ladders.chat(
        "notes", [{"role": "user", "content": "hi"}], conversation_id="会话-1"
    )
    recorded = local.runs.get(other.id.removeprefix("chatcmpl-"))
    assert "会话-1" in json.dumps(recorded.model_dump(mode="json"), ensure_ascii=False)
    with pytest.raises(NotFoundError) as info:
        local.ladders.chat("missing", [{"role": "user", "content": "hi"}])
    assert info.value.code == "ladder_not_found"
    with pytest.raises(NotFoundError):
        local.runs.get("run-unknown")


def test_memories_compile_jobs_and_search(local: Cairn) -> None:
    ep = local.episodes.create(
        "user-5",
        source="chat",
        type="message",
        payload={"text": "I prefer green tea in the morning", "role": "user"},
    )
    result = local.memories.compile("user-5")
    assert result.memories_created >= 1 and result.has_more is False
    assert all(ep.id in m.source_episode_ids for m in result.memories)
    assert local.memories.compile("user-5").memories_created == 0  # nothing new: no duplicate
    found = local.memories.search("user-5", "green tea", limit=5)
    assert found.memories and all(0 <= (m.score or 0) <= 1 for m in found.memories)
    kinds = {m.kind for m in result.memories}
    only = local.memories.search("user-5", "tea", kinds=sorted(kinds)[:1])
    assert {m.kind for m in only.memories} <= set(sorted(kinds)[:1])
    local.episodes.create(
        "user-5", source="chat", type="message", payload={"text": "My name is Ada Lovelace"}
    )
    queued = local.memories.compile_async("user-5")
    job = local.memories.wait(queued.job_id, timeout=30, interval=0.05)
    assert job.status == "completed" and job.memories_created >= 1
    assert local.timeline("user-5").memories
    with pytest.raises(InvalidRequestError) as info:
        local.memories.search("user-5", "tea", kinds=["no-such-kind"])
    assert info.value.code == "unknown_kind"
    with pytest.raises(NotFoundError) as nf:
        local.memories.job(uuid.uuid4())
    assert nf.value.code == "job_not_found"


def test_an_error_event_in_a_stream_raises_with_its_code() -> None:
    from cairn.client._ladders import chunks

    lines = [
        'data: {"id": "chatcmpl-r", "choices": [{"index": 0, "delta": {"content": "Hel"}}]}',
        "",
        'data: {"error": {"code": "slate_limit_exceeded", "message": "full", "details": null,'
        ' "request_id": null}}',
    ]
    seen: list[str] = []
    with pytest.raises(InvalidRequestError) as info:
        for chunk in chunks(lines):
            seen.append(chunk.text)
    assert seen == ["Hel"] and info.value.code == "slate_limit_exceeded"


def test_one_in_process_client_shared_by_threads(local: Cairn) -> None:
    from concurrent.futures import ThreadPoolExecutor

    def record(n: int) -> str:
        return str(
            local.episodes.create(
                f"t-{n % 4}", source="s", type="t", payload={"n": n}, idempotency_key=f"k-{n}"
            ).id
        )

    with ThreadPoolExecutor(max_workers=8) as pool:
        ids = list(pool.map(record, range(80)))
    assert len(set(ids)) == 80
    assert sum(s.episode_count for s in local.subjects.list().subjects) == 80
