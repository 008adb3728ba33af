"""Slates: folders (the lock rows), files, entries, evictions and skipped writes.

Revision ID: 0003_slates
"""

import sqlalchemy as sa
from alembic import op

from cairn.store.schema import JsonType, SeqType, UTCDateTime

revision = "0003_slates"
down_revision = "0001_foundation"
branch_labels = ("slates",)
depends_on = None

RefType = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    """The slate tables and their indexes, in the order they are created. Longer than 80
    lines on purpose: a recorded migration is one flat DDL script that is never edited, and
    splitting it into helpers would only hide that order."""
    op.create_table(
        "slate_folders",
        sa.Column("id", SeqType, primary_key=True, autoincrement=True),
        sa.Column("tenant_id", sa.String(128), nullable=False),
        sa.Column("ladder", sa.String(256), nullable=False),
        sa.Column("user_id", sa.String(256), nullable=False, server_default=""),
        sa.Column("slate", sa.String(128), nullable=False),
        sa.Column("folder", sa.String(128), nullable=False),
        sa.Column("clock", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("usage", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.UniqueConstraint(
            "tenant_id", "ladder", "user_id", "slate", "folder", name="uq_slate_folders"
        ),
    )
    op.create_table(
        "slate_files",
        sa.Column("id", SeqType, primary_key=True, autoincrement=True),
        sa.Column(
            "folder_id",
            RefType,
            sa.ForeignKey("slate_folders.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("kind", sa.String(8), nullable=False, server_default="text"),
        sa.Column("tags", JsonType, nullable=False),
        sa.Column("last_used", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("ordinal", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("tokens", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("bytes", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.UniqueConstraint("folder_id", "name", name="uq_slate_files"),
    )
    op.create_table(
        "slate_entries",
        sa.Column("id", SeqType, primary_key=True, autoincrement=True),
        sa.Column(
            "folder_id",
            RefType,
            sa.ForeignKey("slate_folders.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("file", sa.String(128), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("position", sa.BigInteger(), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("tokens", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.String(256), nullable=True),
        sa.Column("written_at", UTCDateTime(), nullable=False),
    )
    op.create_index("ix_slate_entries_folder", "slate_entries", ["folder_id", "file", "position"])
    op.create_table(
        "slate_evictions",
        sa.Column("id", SeqType, primary_key=True, autoincrement=True),
        sa.Column("tenant_id", sa.String(128), nullable=False),
        sa.Column("ladder", sa.String(256), nullable=False),
        sa.Column("user_id", sa.String(256), nullable=False, server_default=""),
        sa.Column("slate", sa.String(128), nullable=False),
        sa.Column("folder", sa.String(128), nullable=False),
        sa.Column("file", sa.String(128), nullable=False),
        sa.Column("preview", sa.Text(), nullable=False),
        sa.Column("tokens", sa.Integer(), nullable=False),
        sa.Column("policy", sa.String(16), nullable=False),
        sa.Column("run_id", sa.String(256), nullable=True),
        sa.Column("evicted_at", UTCDateTime(), nullable=False),
    )
    op.create_index(
        "ix_slate_evictions_slate",
        "slate_evictions",
        ["tenant_id", "ladder", "slate", "user_id", "id"],
    )
    op.create_table(
        "slate_skips",
        sa.Column("id", SeqType, primary_key=True, autoincrement=True),
        sa.Column("tenant_id", sa.String(128), nullable=False),
        sa.Column("ladder", sa.String(256), nullable=False),
        sa.Column("user_id", sa.String(256), nullable=False, server_default=""),
        sa.Column("slate", sa.String(128), nullable=False),
        sa.Column("folder", sa.String(128), nullable=False),
        sa.Column("file", sa.String(128), nullable=False),
        sa.Column("reason", sa.String(64), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False, server_default=""),
        sa.Column("run_id", sa.String(256), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
    )
    op.create_index(
        "ix_slate_skips_slate", "slate_skips", ["tenant_id", "ladder", "slate", "user_id", "id"]
    )


def downgrade() -> None:
    op.drop_table("slate_skips")
    op.drop_table("slate_evictions")
    op.drop_table("slate_entries")
    op.drop_table("slate_files")
    op.drop_table("slate_folders")
