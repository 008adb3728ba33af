"""Turns: confidence by how much a turn says.

The heuristic compiler now gives a turn with content a confidence between 0.5 and 1 by its
content words (``cairn.engine.compile.heuristic.turn_confidence``: full from ten words), where
it gave every such turn 1.0; search multiplies relevance by confidence, so a brief turn ("go
on", "Bad news") no longer outranks an equally relevant one that states something. This brings
the turns compiled before to the same rule: a turn of the heuristic compiler with confidence
1.0, neither contentless (0.2 already) nor corrected by someone (a correction keeps the
confidence its editor gave). The rule is written out here as it was when this ran, so a later
change of the compiler does not change what this migration did.

Revision ID: 0015_turn_confidence
"""

import json
from typing import Any

import sqlalchemy as sa
from alembic import op

from cairn.core.analysis import content_size

revision = "0015_turn_confidence"
down_revision = "0014_compile_indexes"
branch_labels = None
depends_on = None

BATCH = 5000
FULL_TURN_WORDS = 10
BRIEF_TURN_CONFIDENCE = 0.5


def confidence(content: str, metadata: dict[str, Any]) -> float:
    """The confidence the compiler gives the turn (its text without the ``Speaker: ``)."""
    speaker = metadata.get("speaker")
    prefix = f"{speaker}: " if isinstance(speaker, str) and speaker else ""
    text = content[len(prefix) :] if prefix and content.startswith(prefix) else content
    size = min(1.0, content_size(text) / FULL_TURN_WORDS)
    return round(BRIEF_TURN_CONFIDENCE + (1.0 - BRIEF_TURN_CONFIDENCE) * size, 4)


def upgrade() -> None:
    _recompute("confidence = 1.0", confidence)


def downgrade() -> None:
    """Turns of content back to 1.0, as the compiler gave them before."""
    _recompute(f"confidence >= {BRIEF_TURN_CONFIDENCE} AND confidence < 1.0", lambda *_: 1.0)


def _recompute(where: str, value_of: Any) -> None:
    """Set ``value_of(content, metadata)`` as the confidence of every heuristic turn matching
    ``where`` that is neither contentless nor corrected, in batches by ``seq``."""
    bind = op.get_bind()
    last = 0
    while True:
        rows = bind.execute(
            sa.text(
                "SELECT seq, content, metadata, confidence FROM memories WHERE kind = 'turn' "
                f"AND {where} AND seq > :last ORDER BY seq LIMIT :batch"
            ),
            {"last": last, "batch": BATCH},
        ).all()
        if not rows:
            return
        changes = []
        for seq, content, raw, old in rows:
            metadata = json.loads(raw) if isinstance(raw, str) else dict(raw or {})
            if (
                metadata.get("compiler") != "heuristic"
                or metadata.get("contentless")
                or "correction" in metadata
            ):
                continue
            value = value_of(str(content), metadata)
            if value != old:
                changes.append({"seq": seq, "value": value})
        if changes:
            bind.execute(
                sa.text("UPDATE memories SET confidence = :value WHERE seq = :seq"), changes
            )
        last = rows[-1][0]
