"""Memories stored before superscripts and subscripts kept their form in content hashes.

Until session 38 a content hash took NFKC of the whole text, so ``The dose is 10⁶ units``
hashed as ``The dose is 106 units`` (one memory, the second statement lost). The hash now
keeps them (``cairn.core.analysis.hash_key``), but a stored memory keeps the hash it was given,
and a forgotten one keeps nothing else (its text is wiped), so no migration can rehash it. A
draft whose text holds a superscript or subscript therefore takes the old hash instead of the
new one when the partition holds that old hash for the same text, or as a tombstone: the same
text still finds its memory, and a forgotten memory stays forgotten. A stored memory of a
different text under that old hash (``106`` for a new ``10⁶``) leaves the draft its own hash.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from cairn.core.analysis import hash_key, holds_kept, legacy_digest
from cairn.core.memories import memory_id
from cairn.core.scope import Scope
from cairn.store import UnitOfWork


def adopt_legacy_hashes(
    tx: UnitOfWork, tenant_id: str, scope: Scope, rows: Iterable[dict[str, Any]]
) -> None:
    """Give each row (``runner._row``) whose text holds a superscript or subscript the hash
    its text had before, where the partition holds that hash for it (see the module)."""
    wanted: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for row in rows:
        if not holds_kept(row["content"]):
            continue
        starts = row["valid_from"] if row["metadata"].get("slot") else None
        old = legacy_digest(row["content"], starts)
        if old != row["content_hash"]:
            wanted.setdefault(row["kind"], {}).setdefault(old, []).append(row)
    for kind, by_hash in wanted.items():
        held = tx.lifecycle.held_hashes(tenant_id, scope, kind, list(by_hash))
        for old, (status, content) in held.items():
            for row in by_hash[old]:
                if status == "deleted" or hash_key(content) == hash_key(row["content"]):
                    row["content_hash"] = old
                    row["id"] = memory_id(tenant_id, scope, kind, old)


__all__ = ["adopt_legacy_hashes"]
