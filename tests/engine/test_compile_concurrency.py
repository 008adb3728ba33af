"""Two compiles of one subject at once — two threads, or two processes — store every memory
once, on SQLite and on PostgreSQL."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from collections import Counter
from datetime import UTC, datetime, timedelta

from cairn.core.episodes import NewEpisode
from cairn.core.scope import Scope
from cairn.engine.compile import compile_scope
from cairn.store import Store, open_store

TENANT = "t1"
N = 300


def _ingest(store: Store, scope: Scope) -> None:
    t0 = datetime(2024, 1, 1, tzinfo=UTC)
    store.episodes.append_many(
        TENANT,
        [
            NewEpisode(
                scope=scope,
                source="test",
                type="conversation.turn",
                payload={
                    "messages": [
                        {
                            "role": "user",
                            "name": "Ann" if i % 2 else "Ben",
                            "content": f"Message {i % 250}: I work at Company{i % 7}.",
                        }
                    ]
                },
                session_id=f"s{i // 30}",
                occurred_at=t0 + timedelta(minutes=i),
            )
            for i in range(N)
        ],
    )


def _active(store: Store, scope: Scope) -> list[tuple[str, str]]:
    return sorted(
        (m.kind, m.content)
        for m in store.memories.list(TENANT, scope, limit=10_000, include_superseded=False)
    )


def _assert_no_duplicates(store: Store, scope: Scope, expected: list[tuple[str, str]]) -> None:
    memories = store.memories.list(TENANT, scope, limit=10_000)
    keys = Counter((m.kind, m.content, m.valid_from) for m in memories)
    assert keys and max(keys.values()) == 1
    # Batches may leave superseded history (e.g. a summary of half a session), but what is
    # current is the same as one compile of everything.
    assert _active(store, scope) == expected
    with store.snapshot() as tx:
        assert tx.compiling.count_uncompiled(TENANT, scope) == 0
    active_slots = Counter(
        m.metadata.get("slot") for m in memories if m.status == "active" and m.metadata.get("slot")
    )
    assert all(n == 1 for n in active_slots.values())


def _reference(tmp_path: object) -> list[tuple[str, str]]:
    ref = open_store(f"sqlite:///{tmp_path}/ref.db")
    scope = Scope.for_subject("shared")
    _ingest(ref, scope)
    while compile_scope(ref, TENANT, scope).has_more:
        pass
    active = _active(ref, scope)
    ref.close()
    return active


def test_two_threads(store: Store, tmp_path: object) -> None:
    scope = Scope.for_subject("shared")
    _ingest(store, scope)
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []
    created: list[int] = []

    def work() -> None:
        try:
            barrier.wait()
            while True:
                r = compile_scope(store, TENANT, scope, max_episodes=50)
                created.append(r.memories_created)
                if not r.has_more:
                    break
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    _assert_no_duplicates(store, scope, _reference(tmp_path))
    assert sum(created) == store.memories.count(TENANT, scope)


_CHILD = textwrap.dedent("""
    import sys
    from cairn.core.scope import Scope
    from cairn.engine.compile import compile_scope
    from cairn.store import open_store
    store = open_store(sys.argv[1])
    scope = Scope.for_subject("shared")
    while compile_scope(store, "t1", scope, max_episodes=40).has_more:
        pass
    store.close()
""")


def test_two_processes(store: Store, db_url: str, tmp_path: object) -> None:
    scope = Scope.for_subject("shared")
    _ingest(store, scope)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, db_url], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for _ in range(2)
    ]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()
    _assert_no_duplicates(store, scope, _reference(tmp_path))
