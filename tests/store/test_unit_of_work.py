"""The storage port: units of work on both backends, and nothing outside ``cairn.store`` that
sees a connection, a dialect or a driver."""

from __future__ import annotations

import ast
import uuid
from pathlib import Path

import pytest

from cairn.core import NewEpisode, Scope
from cairn.store import NotInTransaction, Store
from cairn.store.documents import NewChunk

SCOPE = Scope.for_subject("u1")


def episode(key: str) -> NewEpisode:
    return NewEpisode(
        scope=SCOPE, source="test", type="note", payload={"text": key}, idempotency_key=key
    )


def put_document(repo_owner: object, key: str) -> None:
    repo_owner.documents.put(  # type: ignore[attr-defined]
        "t",
        SCOPE,
        dataset_id="kb",
        document_id=key,
        idempotency_key=key,
        title="",
        metadata_={},
        chunks=[NewChunk("the Oslo ferry leaves at nine", 0, 29, 7)],
    )


def stored(store: Store) -> tuple[int, list[str]]:
    chunks = store.documents.search_chunks("t", SCOPE, ["kb"], ["oslo", "ferry"])
    return store.episodes.count("t", SCOPE), [c.document_id for c in chunks]


def test_repositories_of_a_transaction_commit_together(store: Store) -> None:
    with store.transaction() as tx:
        tx.episodes.append_many("t", [episode("a")])
        put_document(tx, "doc-a")
        # The unit reads its own writes; another reader does not see them before the commit.
        assert tx.episodes.count("t", SCOPE) == 1
        assert store.episodes.count("t", SCOPE) == 0
    assert stored(store) == (1, ["doc-a"])


def test_a_transaction_that_raises_leaves_nothing(store: Store) -> None:
    with pytest.raises(RuntimeError, match="after both writes"), store.transaction() as tx:
        tx.episodes.append_many("t", [episode("b")])
        put_document(tx, "doc-b")
        raise RuntimeError("after both writes")
    assert stored(store) == (0, [])


def test_a_snapshot_refuses_writes_and_steps_need_a_unit(store: Store) -> None:
    with store.snapshot() as tx:
        assert tx.episodes.count("t", SCOPE) == 0
        with pytest.raises(NotInTransaction):
            tx.memories.supersede(uuid.uuid4(), uuid.uuid4(), None, None)  # type: ignore[arg-type]
        with pytest.raises(NotInTransaction):
            tx.compiling.mark_compiled([uuid.uuid4()])
    # A step of a larger transaction, called on the store's unbound repository.
    with pytest.raises(NotInTransaction):
        store.memories.insert_new([])
    with pytest.raises(NotInTransaction):
        store.slates.lock_folder(None, None)  # type: ignore[arg-type]
    # Unbound calls that stand alone open their own transaction.
    store.episodes.append_many("t", [episode("c")])
    assert store.episodes.count("t", SCOPE) == 1


def test_a_snapshot_does_not_see_a_commit_that_lands_during_it(store: Store) -> None:
    """Every read of a snapshot sees the database as it was at its first read, on both
    backends (PostgreSQL's default READ COMMITTED would show the new episode to the second)."""
    store.episodes.append_many("t", [episode("before")])
    with store.snapshot() as tx:
        assert tx.episodes.count("t", SCOPE) == 1
        store.episodes.append_many("t", [episode("during")])  # commits on its own
        assert store.episodes.count("t", SCOPE) == 2
        assert tx.episodes.count("t", SCOPE) == 1
    with store.snapshot() as tx:
        assert tx.episodes.count("t", SCOPE) == 2


def test_capabilities_not_dialects(store: Store, backend: str) -> None:
    assert store.single_writer is (backend == "sqlite")
    assert store.backend == ("sqlite" if backend == "sqlite" else "postgresql")
    assert store.ping()
    assert store.queue_stats().queued == 0


SRC = Path(__file__).resolve().parents[2] / "src" / "cairn"
DRIVERS = {"sqlalchemy", "psycopg2", "sqlite3", "alembic"}
# Attributes of the adapter that callers must not reach through a Store.
ADAPTER = {"db", "dialect", "is_sqlite", "engine"}


def test_nothing_outside_the_store_sees_the_database() -> None:
    """No module outside ``cairn.store`` imports a driver or reaches into ``store.db``."""
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith("store/"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module.split(".")[0]]
            elif isinstance(node, ast.Attribute) and node.attr in ADAPTER:
                base = node.value
                owner = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
                names = ["store.db"] if owner == "store" or node.attr == "db" else []
            else:
                continue
            offenders += [f"{rel}:{node.lineno} {n}" for n in names if n in DRIVERS | {"store.db"}]
    assert offenders == []
