"""Content hashes that keep superscripts, subscripts and ``ß`` (migration 0031), both
backends: a compile keeps ``10⁶`` and ``106`` apart, and the migration recomputes the hash of
each stored memory whose content holds such a character, and of no other."""

from __future__ import annotations

import hashlib
import unicodedata

from alembic import command
from sqlalchemy import create_engine, select

from cairn.core.analysis import content_digest, hash_key
from cairn.core.scope import Scope
from cairn.store import open_store
from cairn.store.database import normalize_url
from cairn.store.migrations import _config
from cairn.store.schema import memories
from tests.store.rows import memory_row

A = Scope.for_subject("hash-kept")
B = Scope.for_subject("hash-kept-b")


def _old_digest(content: str) -> str:
    """The digest before 0031: NFKC and full case folding of everything."""
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", content).casefold())
    return hashlib.sha256(("text-v2\x1f" + " ".join(folded.split())).encode()).hexdigest()


def test_hash_key_keeps_superscripts_subscripts_and_sharp_s() -> None:
    assert hash_key("The dose is 10⁶ units.") != hash_key("The dose is 106 units.")
    assert hash_key("H₂O") != hash_key("H2O")
    assert hash_key("Ich trinke in Maßen.") != hash_key("Ich trinke in Massen.")
    assert hash_key("STRAẞE") == hash_key("straße")  # capital sharp s is its case
    assert hash_key("ＣＡＦÉ ﬁne") == hash_key("café fine")  # width, ligatures, case
    # Texts without such characters hash as before (no stored row of theirs changes).
    for text in ("Я живу в Москве", "我住在北京", "Café  Noir", "I like tea."):
        assert content_digest(text) == _old_digest(text)


def test_0031_rehashes_only_the_memories_that_hold_a_kept_character(db_url: str) -> None:
    contents = ["The dose is 10⁶ units.", "Ich trinke in Maßen.", "Я живу в Москве", "plain"]
    store = open_store(db_url)
    try:
        with store.transaction() as tx:
            rows = [memory_row(A, c, content_hash=_old_digest(c)) for c in contents]
            # B holds a row whose new hash another of its rows holds already (imported).
            rows.append(memory_row(B, "x²", content_hash=_old_digest("x²")))
            rows.append(memory_row(B, "x² clash", content_hash=content_digest("x²")))
            tx.memories.insert_new(rows)
    finally:
        store.close()
    engine = create_engine(normalize_url(db_url))
    try:
        with engine.connect() as conn:
            command.downgrade(_config(conn), "0030_vector_waits")
            conn.commit()
        open_store(db_url).close()  # migrates: 0031 again
        with engine.connect() as conn:
            found = dict(conn.execute(select(memories.c.content, memories.c.content_hash)).all())
    finally:
        engine.dispose()
    assert found["The dose is 10⁶ units."] == content_digest("The dose is 10⁶ units.")
    assert found["Ich trinke in Maßen."] == content_digest("Ich trinke in Maßen.")
    assert found["Я живу в Москве"] == _old_digest("Я живу в Москве")
    assert found["plain"] == _old_digest("plain")
    assert found["x²"] == _old_digest("x²")  # left as it was: the new one is taken
    assert found["The dose is 10⁶ units."] != _old_digest("The dose is 10⁶ units.")
