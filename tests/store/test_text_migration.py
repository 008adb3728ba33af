"""Migration 0009 on both backends: stored content hashes are recomputed over Unicode (rows
that now share a hash both stay), ids stay, every row is re-indexed from its analysed text,
and compiling the same content afterwards finds the stored memory instead of adding one."""

from __future__ import annotations

import hashlib
import re
import uuid
from datetime import UTC, datetime
from typing import Any

from alembic import command
from sqlalchemy import create_engine, select

from cairn.core.analysis import content_digest
from cairn.core.episodes import NewEpisode
from cairn.core.scope import Scope
from cairn.engine.compile import compile_scope
from cairn.engine.query import ranking_terms
from cairn.engine.search import search_memories
from cairn.store import fts, open_store
from cairn.store.database import normalize_url
from cairn.store.documents import NewChunk
from cairn.store.migrations import _config, current_revisions
from cairn.store.schema import memories

TENANT = "t1"
SCOPE = Scope.for_subject("li")
AT = datetime(2024, 3, 1, 10, 0, tzinfo=UTC)
# Content of the rows an older version stored (kind, content): with the ASCII-only hash, the
# two Chinese turns could never both exist, so only one is here.
OLD_ROWS = [
    ("turn", "Li: 我住在北京"),
    ("turn", "Li: J'habite à Genève"),
    ("profile_fact", "Li lives in Straße 5"),
    ("profile_fact", "Li lives in STRASSE 5"),  # one hash key with the row above, now
]


def _old_hash(content: str) -> str:
    return hashlib.sha256(" ".join(re.findall(r"[a-z0-9]+", content.lower())).encode()).hexdigest()


def _row(kind: str, content: str) -> dict[str, Any]:
    digest = _old_hash(content)
    return {
        "id": uuid.uuid5(uuid.NAMESPACE_URL, digest),
        "tenant_id": TENANT,
        "runtime_id": SCOPE.runtime_id,
        "user_id": SCOPE.user_id,
        "agent_id": SCOPE.agent_id,
        "session_id": "c1",
        "kind": kind,
        "content": content,
        "summary": content,
        "confidence": 1.0,
        "valid_from": AT,
        "status": "active",
        "source_episode_ids": [str(uuid.uuid4())],
        "metadata": {"keywords": "2024 march"},
        "content_hash": digest,
        "created_at": AT,
        "updated_at": AT,
    }


def test_0009_rehashes_and_reindexes_stored_rows(db_url: str) -> None:
    store = open_store(db_url)
    try:  # the tenant's first writes (so its index exists), at the newest schema
        store.documents.put(
            TENANT,
            SCOPE,
            dataset_id="d",
            document_id="doc",
            idempotency_key="doc",
            title="",
            metadata_={},
            chunks=[NewChunk("东京是日本的首都", 0, 8, 10)],
        )
    finally:
        store.close()
    engine = create_engine(normalize_url(db_url))
    with engine.connect() as conn:
        command.downgrade(_config(conn), "0007_fts_per_tenant")
        conn.commit()
        assert "0009_text_analysis" not in current_revisions(conn)
        rows = [_row(kind, content) for kind, content in OLD_ROWS]
        if conn.dialect.name == "sqlite":  # the tenant's memory index, as 0007 made it
            fts.TenantIndexes().ensure(conn, fts.RAW_MEMORIES, TENANT)
        conn.execute(memories.insert(), rows)  # as the older code stored them
        conn.commit()
    engine.dispose()

    store = open_store(db_url)  # migrates: 0009 runs over the rows
    try:
        with store.db.read() as conn:
            stored = {r.content: r for r in conn.execute(select(memories))}
        assert {r["id"] for r in rows} == {s.id for s in stored.values()}  # ids kept
        assert stored["Li: 我住在北京"].content_hash == content_digest("Li: 我住在北京")
        strasse = [stored["Li lives in Straße 5"], stored["Li lives in STRASSE 5"]]
        assert content_digest("Li lives in Straße 5") in {s.content_hash for s in strasse}
        assert len({s.content_hash for s in strasse}) == 2  # both rows stay, hashes distinct
        assert "北京" in stored["Li: 我住在北京"].search_text.split()

        found = search_memories(store, TENANT, SCOPE, "北京")
        assert found and found[0].memory.content == "Li: 我住在北京"
        found = search_memories(store, TENANT, SCOPE, "Geneve")
        assert found and found[0].memory.content == "Li: J'habite à Genève"
        chunks = store.documents.search_chunks(TENANT, SCOPE, ["d"], ranking_terms("东京"))
        assert [c.content for c in chunks] == ["东京是日本的首都"]

        # The same turn compiled again (new hash scheme, new id) is the stored memory.
        episodes, _ = store.episodes.append_many(
            TENANT,
            [
                NewEpisode(
                    scope=SCOPE,
                    source="chat",
                    type="conversation.turn",
                    session_id="c1",
                    occurred_at=AT,
                    payload={"messages": [{"role": "user", "name": "Li", "content": text}]},
                )
                for text in ("我住在北京", "我明天去上海")
            ],
        )
        compile_scope(store, TENANT, SCOPE)
        turns = store.memories.list(TENANT, SCOPE, kind="turn")
        beijing = [m for m in turns if m.content == "Li: 我住在北京"]
        assert len(beijing) == 1 and beijing[0].id == stored["Li: 我住在北京"].id
        assert episodes[0].id in beijing[0].source_episode_ids  # provenance merged
        assert any(m.content == "Li: 我明天去上海" for m in turns)
    finally:
        store.close()
