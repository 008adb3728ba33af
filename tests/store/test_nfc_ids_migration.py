"""Migration 0025 on both backends: partitions stored under an id that is not NFC (a subject
id typed with a combining accent) are renamed to the NFC form in every table, stay searchable
(SQLite re-indexes their full-text entries under the new partition token), and a partition
whose NFC form holds data of its own is left as it was."""

from __future__ import annotations

import unicodedata

from alembic import command
from sqlalchemy import create_engine, inspect, text

from cairn.core.scope import Scope
from cairn.engine.lifecycle import erase_subject
from cairn.store import open_store
from cairn.store.database import normalize_url
from cairn.store.migrations import _config
from cairn.store.partitions import SCOPED_TABLES
from tests.store.test_turn_confidence_migration import TENANT, compile_turns

JOSE = "José"  # NFC
JOSE_NFD = unicodedata.normalize("NFD", JOSE)
ZOE, ZOE_NFD = "Zoë", unicodedata.normalize("NFD", "Zoë")


def _rename(conn: object, old: str, new: str, sqlite: bool) -> None:
    """Store ``old``'s partitions under ``new``, as an older release would have written them
    (SQLite: the full-text entries re-indexed under that id too)."""
    present = set(inspect(conn).get_table_names())  # type: ignore[arg-type]
    for table in (t for t in SCOPED_TABLES if t.name in present):  # (tables of later revisions)
        touch = (
            ", search_text = search_text"
            if sqlite
            and table.name
            in (
                "memories",
                "document_chunks",
            )
            else ""
        )
        conn.execute(  # type: ignore[attr-defined]
            text(f"UPDATE {table.name} SET user_id = :n{touch} WHERE user_id = :o"),
            {"n": new, "o": old},
        )


def test_0025_renames_decomposed_ids_to_nfc(db_url: str) -> None:
    store = open_store(db_url)
    try:
        compile_turns(store, Scope.for_subject(JOSE), "José", ["I keep bees in Guimarães."])
        compile_turns(store, Scope.for_subject(ZOE), "Zoë", ["I keep goats in Ghent."])
        compile_turns(store, Scope.for_subject("zoe-tmp"), "Zoë", ["I sail in Ostend."])
    finally:
        store.close()
    engine = create_engine(normalize_url(db_url))
    sqlite = engine.dialect.name == "sqlite"
    with engine.connect() as conn:
        command.downgrade(_config(conn), "0024_grapheme_terms")
        _rename(conn, JOSE, JOSE_NFD, sqlite)
        _rename(conn, "zoe-tmp", ZOE_NFD, sqlite)  # beside the NFC Zoë, who has data
        conn.commit()
        command.upgrade(_config(conn), "heads")
        conn.commit()
        users = {
            str(u)
            for table in SCOPED_TABLES
            for (u,) in conn.execute(text(f"SELECT DISTINCT user_id FROM {table.name}"))
        }
    engine.dispose()
    assert JOSE in users and JOSE_NFD not in users
    assert ZOE in users and ZOE_NFD in users  # not merged into the NFC Zoë's partition

    store = open_store(db_url)
    try:
        hits = store.memories.lexical(TENANT, Scope.for_subject(JOSE), ["bees"], limit=5)
        assert hits  # found under the NFC id, full-text entries included
        assert Scope.for_subject(JOSE_NFD) == Scope.for_subject(JOSE)
        # The Zoë left decomposed is the same person: erasing Zoë erases both partitions.
        erased = erase_subject(store, TENANT, ZOE_NFD)
        assert erased["episodes"] == 2
    finally:
        store.close()
    engine = create_engine(normalize_url(db_url))
    with engine.connect() as conn:
        left = {str(u) for (u,) in conn.execute(text("SELECT DISTINCT user_id FROM memories"))}
    engine.dispose()
    assert left == {JOSE}
