"""Turns: chat filler of more languages is contentless.

The contentless rule (``cairn.core.filler``) now knows the Arabic and Korean counterparts of
its English words (see you soon, talk later, anyway, God willing, goodbye, oh cool) and Korean
laughter (ㅋㅋ, ㅎㅎ). The compiler gives a contentless turn confidence 0.2, marks it
``contentless`` and indexes it without its neighbours' words; this brings the turns compiled
before to the same rule: a turn of the heuristic compiler, not contentless yet and not
corrected by someone, whose text the rule now finds contentless gets all three, and loses its
vector (the background pass embeds it again, without the neighbours' words; the partition's
vector version moves on, so no process keeps serving the old one from its cache).

It applies the rule as ``cairn.core.filler`` has it when it runs: a later, longer list only
finds more filler, which is what this migration is for. Left as they are (the compiler does
both for turns it compiles now): the stated name among a converted turn's keywords, and the
filler words among its neighbours' indexed words; both only add words of little weight.

Going down changes nothing: the older rule keeps a contentless turn as the compiler made it.

Revision ID: 0017_contentless_turns
"""

import json

import sqlalchemy as sa
from alembic import op

from cairn.core.filler import is_contentless
from cairn.store.migrations.turns import bump_vector_versions, turn_text

revision = "0017_contentless_turns"
down_revision = "0016_memory_lengths"
branch_labels = None
depends_on = None

BATCH = 5000
CONTENTLESS_CONFIDENCE = 0.2


def upgrade() -> None:
    bind = op.get_bind()
    last = 0
    touched: set[tuple[str, str, str, str]] = set()
    while True:
        rows = bind.execute(
            sa.text(
                "SELECT seq, content, metadata, tenant_id, runtime_id, user_id, agent_id "
                "FROM memories WHERE kind = 'turn' AND confidence > :floor AND seq > :last "
                "ORDER BY seq LIMIT :batch"
            ),
            {"floor": CONTENTLESS_CONFIDENCE, "last": last, "batch": BATCH},
        ).all()
        if not rows:
            bump_vector_versions(bind, touched)
            return
        changes = []
        for seq, content, raw, tenant, runtime, user, agent in rows:
            metadata = json.loads(raw) if isinstance(raw, str) else dict(raw or {})
            if (
                metadata.get("compiler") != "heuristic"
                or metadata.get("contentless")
                or "correction" in metadata
                or not is_contentless(turn_text(str(content), metadata))
            ):
                continue
            metadata["contentless"] = True
            metadata["context_terms"] = ""
            changes.append({"seq": seq, "value": CONTENTLESS_CONFIDENCE, "m": json.dumps(metadata)})
            touched.add((tenant, runtime, user, agent))
        if changes:
            bind.execute(
                sa.text(
                    "UPDATE memories SET confidence = :value, metadata = :m, embedding = NULL "
                    "WHERE seq = :seq"
                ),
                changes,
            )
        last = rows[-1][0]


def downgrade() -> None:
    """Nothing to undo (see the module)."""
