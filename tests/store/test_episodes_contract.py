"""The storage contract for episodes, run on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

from cairn.core import NewEpisode, Scope
from cairn.store import Store


def ep(subject: str = "u1", key: str | None = None, **kw: object) -> NewEpisode:
    values: dict[str, object] = {
        "scope": Scope.for_subject(subject),
        "source": "test",
        "type": "note",
        "payload": {"text": "hello"},
        "idempotency_key": key,
    }
    values.update(kw)
    return NewEpisode(**values)  # type: ignore[arg-type]


def test_append_assigns_id_and_times(store: Store) -> None:
    stored, created = store.episodes.append("t", ep())
    assert created
    assert stored.id.version == 7
    assert stored.occurred_at.tzinfo is not None
    assert store.episodes.get("t", stored.id) == stored


def test_repeated_key_returns_original_and_writes_nothing(store: Store) -> None:
    first, created = store.episodes.append("t", ep(key="k1"))
    again, created_again = store.episodes.append("t", ep(key="k1", payload={"other": 1}))
    assert created and not created_again
    assert again.id == first.id and again.payload == {"text": "hello"}
    assert store.episodes.count("t", Scope.for_subject("u1")) == 1


def test_same_key_in_other_scope_or_tenant_is_a_new_episode(store: Store) -> None:
    a, _ = store.episodes.append("t", ep("u1", key="k"))
    b, created_b = store.episodes.append("t", ep("u2", key="k"))
    c, created_c = store.episodes.append("t2", ep("u1", key="k"))
    assert created_b and created_c
    assert len({a.id, b.id, c.id}) == 3


def test_batch_keeps_order_and_dedups_within_batch(store: Store) -> None:
    items = [ep(key="a"), ep(key=None), ep(key="a"), ep(key="b")]
    episodes, created = store.episodes.append_many("t", items)
    assert created == 3
    assert episodes[0].id == episodes[2].id
    assert [e.idempotency_key for e in episodes] == ["a", None, "a", "b"]


def test_concurrent_appends_with_one_key_store_one_episode(store: Store) -> None:
    results: list[object] = []
    barrier = threading.Barrier(6)

    def worker() -> None:
        barrier.wait()
        results.append(store.episodes.append("t", ep(key="race"))[0].id)

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(set(results)) == 1
    assert store.episodes.count("t", Scope.for_subject("u1")) == 1


def test_list_orders_by_occurred_at_and_isolates_scopes(store: Store) -> None:
    base = datetime(2024, 1, 1, tzinfo=UTC)
    store.episodes.append("t", ep(occurred_at=base + timedelta(days=2), payload={"n": 2}))
    store.episodes.append("t", ep(occurred_at=base, payload={"n": 0}))
    store.episodes.append("t", ep(occurred_at=base + timedelta(days=1), payload={"n": 1}))
    store.episodes.append("t", ep("other", payload={"n": 9}))
    store.episodes.append("t2", ep(payload={"n": 8}))
    store.episodes.append(
        "t",
        NewEpisode(
            scope=Scope(runtime_id="default", user_id="u1", agent_id="bot"),
            source="s",
            type="x",
            payload={"n": 7},
        ),
    )
    listed = store.episodes.list("t", Scope.for_subject("u1"))
    assert [e.payload["n"] for e in listed] == [0, 1, 2]


def test_subjects_list_counts_and_delete(store: Store) -> None:
    store.episodes.append_many("t", [ep("alice"), ep("alice"), ep("bob")])
    store.episodes.append("t2", ep("carol"))
    subjects, total = store.subjects.list("t")
    assert total == 2
    assert [(s.subject_id, s.episode_count) for s in subjects] == [("alice", 2), ("bob", 1)]
    counts = store.subjects.delete_scope("t", Scope.for_subject("alice"))
    assert counts["episodes"] == 2
    assert store.subjects.list("t")[1] == 1
    assert store.subjects.list("t2")[1] == 1


def test_keys_are_hashed_and_revocable(store: Store) -> None:
    key, info = store.keys.create("acme", name="ci")
    assert store.keys.tenant_for(key) == "acme"
    assert store.keys.tenant_for(key + "x") is None
    listed = store.keys.list("acme")
    assert [k.id for k in listed] == [info.id]
    assert key not in repr(listed)
    assert store.keys.revoke(info.id) == 1
    assert store.keys.tenant_for(key) is None
