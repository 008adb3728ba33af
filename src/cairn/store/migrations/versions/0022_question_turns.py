"""Turns: a turn that only asks states nothing to recall.

The heuristic compiler now multiplies the confidence of a turn that only asks ("Hey! How was
Denmark?", "عملت محضر؟"; ``cairn.core.filler.is_question``) by 0.75: search multiplies
relevance by confidence, so small talk that names a person or a topic no longer fills a small
budget ahead of the turn that answers. This brings the turns compiled before to the same rule:
a turn of the heuristic compiler, neither contentless nor corrected by someone, whose text only
asks. The factor is written out here as it was when this ran; the rule is
``cairn.core.filler``'s when it runs.

Going down divides the factor out again (to three decimals, at most 1.0: the compiler's
confidences step by 0.025).

Revision ID: 0022_question_turns
"""

import json
from collections.abc import Callable

import sqlalchemy as sa
from alembic import op

from cairn.core.filler import is_question
from cairn.store.migrations.turns import turn_text

revision = "0022_question_turns"
down_revision = "0021_search_stems"
branch_labels = None
depends_on = None

BATCH = 5000
QUESTION_FACTOR = 0.75
# ? and the marks NFKC makes one: full-width, small, doubled; and the Arabic question mark.
QUESTION_MARKS = ("?", "\uff1f", "\ufe56", "\u2047", "\u2048", "\u2049", "\u061f")


def upgrade() -> None:
    _rescale(lambda old: round(old * QUESTION_FACTOR, 4))


def downgrade() -> None:
    _rescale(lambda old: min(1.0, round(old / QUESTION_FACTOR, 3)))


def _rescale(value_of: Callable[[float], float]) -> None:
    """Set ``value_of(confidence)`` on every heuristic turn that only asks and is neither
    contentless nor corrected, in batches by ``seq``."""
    bind = op.get_bind()
    # Only a turn with a question mark can only ask (the rule reads the rest).
    patterns = {f"q{i}": f"%{mark}%" for i, mark in enumerate(QUESTION_MARKS)}
    marks = " OR ".join(f"content LIKE :{name}" for name in patterns)
    last = 0
    while True:
        rows = bind.execute(
            sa.text(
                "SELECT seq, content, metadata, confidence FROM memories WHERE kind = 'turn' "
                f"AND ({marks}) AND seq > :last ORDER BY seq LIMIT :batch"
            ),
            {**patterns, "last": last, "batch": BATCH},
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
                or not is_question(turn_text(str(content), metadata))
            ):
                continue
            changes.append({"seq": seq, "value": value_of(float(old))})
        if changes:
            bind.execute(
                sa.text("UPDATE memories SET confidence = :value WHERE seq = :seq"), changes
            )
        last = rows[-1][0]
