"""Inspector sessions: opaque random tokens (stored as SHA-256 digests) bound to an API key.

Revision ID: 0012_ui_sessions
"""

import sqlalchemy as sa
from alembic import op

from cairn.store.schema import UTCDateTime

revision = "0012_ui_sessions"
down_revision = "0001_foundation"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ui_sessions",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("tenant_id", sa.String(128), nullable=False),
        sa.Column("key_id", sa.String(36), nullable=False, index=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("expires_at", UTCDateTime(), nullable=False, index=True),
        sa.Column("revoked_at", UTCDateTime(), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("ui_sessions")
