"""Subjects: the REST shorthand for the scopes ``("default", subject_id, "")``."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, literal, select, union_all

from cairn.core.scope import DEFAULT_RUNTIME, Scope
from cairn.core.subject_id import canonical_id
from cairn.store.partitions import PartitionSelector, erase
from cairn.store.repository import Repository
from cairn.store.schema import episodes, memories


@dataclass(frozen=True, slots=True)
class SubjectSummary:
    subject_id: str
    episode_count: int
    memory_count: int


class SubjectRepository(Repository):
    def list(
        self, tenant_id: str, *, limit: int = 100, offset: int = 0, prefix: str | None = None
    ) -> tuple[list[SubjectSummary], int]:
        """Subjects with their counts, ordered by id, and the total number of subjects."""
        parts = []
        for table, is_episode in ((episodes, 1), (memories, 0)):
            stmt = select(
                table.c.user_id.label("subject_id"),
                literal(is_episode).label("e"),
                literal(1 - is_episode).label("m"),
            ).where(
                table.c.tenant_id == tenant_id,
                table.c.runtime_id == DEFAULT_RUNTIME,
                table.c.agent_id == "",
                table.c.user_id != "",
            )
            if table is memories:
                stmt = stmt.where(table.c.status != "deleted")
            if prefix:
                prefix = canonical_id(prefix)
                # LIKE narrows (and can use an index); SQLite's LIKE ignores the case of
                # ASCII letters, so the exact comparison decides, as on PostgreSQL.
                stmt = stmt.where(
                    table.c.user_id.startswith(prefix, autoescape=True),
                    func.substr(table.c.user_id, 1, len(prefix)) == prefix,
                )
            parts.append(stmt)
        rows = union_all(*parts).subquery()
        # Code point order on both backends (PostgreSQL's default collation follows a locale).
        order = rows.c.subject_id if self.db.is_sqlite else rows.c.subject_id.collate("C")
        grouped = (
            select(rows.c.subject_id, func.sum(rows.c.e), func.sum(rows.c.m))
            .group_by(rows.c.subject_id)
            .order_by(order)
            .limit(limit)
            .offset(offset)
        )
        total = select(func.count(func.distinct(rows.c.subject_id)))
        with self._reading() as conn:
            items = [
                SubjectSummary(str(r[0]), int(r[1] or 0), int(r[2] or 0))
                for r in conn.execute(grouped)
            ]
            count = int(conn.execute(total).scalar_one())
        return items, count

    def delete_scope(self, tenant_id: str, scope: Scope) -> dict[str, int]:
        """Remove every row of one partition from every registered table (see
        ``cairn.store.partitions``); counts per table. ``cairn.engine.lifecycle.erase`` also
        purges indexes and caches: the API and the inspector call that."""
        with self._writing() as conn:
            return erase(conn, PartitionSelector.of_scope(tenant_id, scope))
