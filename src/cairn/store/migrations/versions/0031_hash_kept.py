"""Content hashes that keep superscripts, subscripts and ``ß``.

A memory's content hash took NFKC and full case folding, so ``The dose is 10⁶ units`` and
``The dose is 106 units`` (NFKC makes ``⁶`` a ``6``), or ``in Maßen`` and ``in Massen`` (full
case folding makes ``ß`` ``ss``), were one memory: the second statement was lost at its
compile. ``cairn.core.analysis.hash_key`` now keeps those characters (``hash_kept_chars``),
and the hash of every stored memory whose content holds one is recomputed. Texts without
them hash as before, so no other row is touched. A recomputed hash that another memory of
the partition and kind already holds (it cannot happen unless data was imported with
hashes of its own) is left as it was.

Revision ID: 0031_hash_kept
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

from cairn.core.analysis import content_digest, hash_kept_chars
from cairn.store.schema import JsonType, UTCDateTime

revision = "0031_hash_kept"
down_revision = "0030_vector_waits"
branch_labels = None
depends_on = None

_memories = sa.Table(
    "memories",
    sa.MetaData(),
    sa.Column("seq", sa.BigInteger(), primary_key=True),
    *(sa.Column(c, sa.String()) for c in ("tenant_id", "runtime_id", "user_id", "agent_id")),
    sa.Column("kind", sa.String()),
    sa.Column("content", sa.Text()),
    sa.Column("valid_from", UTCDateTime()),
    sa.Column("metadata", JsonType),
    sa.Column("content_hash", sa.String()),
)
PART = ("tenant_id", "runtime_id", "user_id", "agent_id", "kind")


def _affected(conn: sa.Connection) -> list[Any]:
    """The memories whose content holds a kept character (a character class on both
    backends: SQLite's GLOB and PostgreSQL's regular expressions take any character)."""
    m, chars = _memories, hash_kept_chars()
    if conn.dialect.name == "sqlite":
        where = m.c.content.op("GLOB")(f"*[{chars}]*")
    else:
        where = m.c.content.op("~")(f"[{chars}]")
    return list(conn.execute(sa.select(m).where(where).order_by(m.c.seq)))


def upgrade() -> None:
    conn = op.get_bind()
    m = _memories
    for row in _affected(conn):
        slot = isinstance(row.metadata, dict) and bool(row.metadata.get("slot"))
        digest = content_digest(row.content, row.valid_from if slot else None)
        if digest == row.content_hash:
            continue
        same = [m.c[c] == getattr(row, c) for c in PART]
        clash = conn.execute(
            sa.select(m.c.seq).where(*same, m.c.content_hash == digest).limit(1)
        ).first()
        if clash is None:
            conn.execute(sa.update(m).where(m.c.seq == row.seq).values(content_hash=digest))


def downgrade() -> None:
    """Nothing to undo: an older release reads these hashes as any other (it would merge the
    next compile's ``106`` into a stored ``10⁶`` memory, as it did before)."""
