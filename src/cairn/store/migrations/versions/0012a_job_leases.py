"""Compile jobs: a lease a live worker renews, so a dead worker's job is taken again quickly.

Revision ID: 0012a_job_leases
"""

import sqlalchemy as sa
from alembic import op

from cairn.store.schema import UTCDateTime

revision = "0012a_job_leases"
down_revision = "0002_compile"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("compile_jobs") as batch:
        batch.add_column(sa.Column("lease_until", UTCDateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("compile_jobs") as batch:
        batch.drop_column("lease_until")
