"""Turns: the filler of Turkish, Vietnamese, Greek, Hebrew, Thai and Hindi is contentless.

``cairn.core.filler`` now knows those languages' acknowledgements, thanks and greetings
("Tamam", "Cảm ơn bạn!", "Ευχαριστώ!", "תודה רבה", "ขอบคุณครับ", "धन्यवाद", Thai "555"). As
``0017_contentless_turns`` did for Arabic and Korean, this brings the turns compiled before to
the rule as the compiler applies it now: a heuristic compiler's turn, not contentless yet and
not corrected, whose text the rule finds contentless gets confidence 0.2, the ``contentless``
mark and no neighbour words in its index (SQLite's stems follow), and loses its vector (the
background pass embeds it again; the partition's vector version moves on).

Going down changes nothing: the older rule keeps a contentless turn as the compiler made it.

Revision ID: 0026_contentless_again
"""

import json

import sqlalchemy as sa
from alembic import op

from cairn.core.filler import is_contentless
from cairn.store.fts5_rank import indexed_stems
from cairn.store.migrations.turns import bump_vector_versions, turn_text

revision = "0026_contentless_again"
down_revision = "0025_nfc_ids"
branch_labels = None
depends_on = None

BATCH = 5000
CONTENTLESS_CONFIDENCE = 0.2


def upgrade() -> None:
    bind = op.get_bind()
    sqlite = bind.dialect.name == "sqlite"
    last, touched = 0, set()
    while True:
        rows = bind.execute(
            sa.text(
                "SELECT seq, content, metadata, search_text, tenant_id, runtime_id, user_id, "
                "agent_id FROM memories WHERE kind = 'turn' AND status != 'deleted' "
                "AND confidence > :floor AND seq > :last ORDER BY seq LIMIT :batch"
            ),
            {"floor": CONTENTLESS_CONFIDENCE, "last": last, "batch": BATCH},
        ).all()
        if not rows:
            break
        last = rows[-1][0]
        changes = []
        for seq, content, raw, analysed, *partition in rows:
            metadata = json.loads(raw) if isinstance(raw, str) else dict(raw or {})
            if (
                metadata.get("compiler") != "heuristic"
                or metadata.get("contentless")
                or "correction" in metadata
                or not is_contentless(turn_text(str(content), metadata))
            ):
                continue
            metadata.update(contentless=True, context_terms="")
            stems = indexed_stems(f"{analysed or ''} ") if sqlite else None
            change = {"q": seq, "v": CONTENTLESS_CONFIDENCE, "m": json.dumps(metadata), "s": stems}
            changes.append(change)
            touched.add(tuple(partition))
        if not changes:
            continue
        stems_set = ", search_stems = :s" if sqlite else ""
        bind.execute(
            sa.text(
                "UPDATE memories SET confidence = :v, metadata = :m, vector_size = NULL"
                f"{stems_set} WHERE seq = :q"
            ),
            changes,
        )
        bind.execute(
            sa.text("DELETE FROM memory_embeddings WHERE seq = :q"),
            [{"q": c["q"]} for c in changes],
        )
    bump_vector_versions(bind, touched)


def downgrade() -> None:
    """Nothing to undo (see the module)."""
