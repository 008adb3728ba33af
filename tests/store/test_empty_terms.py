"""An empty search term is no term on either backend (PostgreSQL would read its quoted form as
a tsquery syntax error: a 500 where a Greek question's word once stemmed to nothing)."""

from __future__ import annotations

from cairn.core.scope import Scope
from cairn.store import open_store
from tests.store.test_turn_confidence_migration import TENANT, compile_turns

SCOPE = Scope.for_subject("katerina")


def test_empty_terms_match_nothing_and_fail_nothing(db_url: str) -> None:
    store = open_store(db_url)
    try:
        compile_turns(store, SCOPE, "Katerina", ["Ανέλαβα το νέο μαγαζί τον Μάιο"])
        assert store.memories.lexical(TENANT, SCOPE, ["", " "], limit=5) == []
        found = store.memories.lexical(TENANT, SCOPE, ["", "μαγαζ"], limit=5)
        assert len(found) == 1
        assert store.documents.search_chunks(TENANT, SCOPE, ["d"], ["", "  "], limit=5) == []
    finally:
        store.close()
