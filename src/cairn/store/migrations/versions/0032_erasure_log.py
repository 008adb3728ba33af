"""The erasure log, ``erasure_log``: a row per erasure (the tenant and the time, nothing of
what was erased), read by every process on the database so that each drops its caches of
that tenant (``cairn.store.erasures``).

Revision ID: 0032_erasure_log
"""

import sqlalchemy as sa
from alembic import op

from cairn.store.schema import SeqType, UTCDateTime

revision = "0032_erasure_log"
down_revision = "0031_invisible_marks"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "erasure_log",
        sa.Column("seq", SeqType, primary_key=True, autoincrement=True),
        sa.Column("tenant_id", sa.String(128), nullable=False),
        sa.Column("erased_at", UTCDateTime(), nullable=False),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_erasure_log_erased_at", "erasure_log", ["erased_at"])


def downgrade() -> None:
    op.drop_index("ix_erasure_log_erased_at", table_name="erasure_log")
    op.drop_table("erasure_log")
