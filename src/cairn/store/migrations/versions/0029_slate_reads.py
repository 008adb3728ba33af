"""The slate files each stored ladder run read or wrote, in ``ladder_run_reads``.

Deleting a slate file, or resetting its folder, deletes the runs whose traces quote it
(``cairn.store.slate_reads``); runs record that as they read and write. This revision records
it for the runs stored before, from each trace's steps (``slate_reads``, and the ``to`` and
the ``evictions`` of each write; a run of ``LADDER:AGENT`` read LADDER's slates), under the
ids ``cairn.store.slate_reads`` makes: both for the slate shared by the ladder's users and for
the run's user's own (the trace does not say which the slate was). The id format is copied
here, as stored ids depend on it. Going down removes those rows.

Revision ID: 0029_slate_reads
"""

import hashlib
import json
import unicodedata
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0029_slate_reads"
down_revision = "0028_run_reads"
branch_labels = None
depends_on = None

BATCH = 500


def _item(kind: str, *path: str) -> str:
    body = json.dumps([kind, *path], ensure_ascii=False)
    return "slate:" + hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()


def _access(ladder: str, user: str, where: dict[str, Any], metatag: Any) -> list[str]:
    slate: str = where["slate"]
    folder = where.get("folder")
    folder = folder if isinstance(folder, str) else ""
    file = where.get("file")
    file = file if isinstance(file, str) else ""
    if metatag == "tree":
        return [_item("tree", ladder, user, slate, "", "")]
    in_folder = _item("folder", ladder, user, slate, folder, "")
    if metatag == "index":
        return [_item("index", ladder, user, slate, folder, ""), in_folder]
    return [_item("file", ladder, user, slate, folder, file), in_folder]


def _items(trace: Any, ladder: str, user_id: str) -> list[str]:
    if isinstance(trace, str):
        try:
            trace = json.loads(trace)
        except ValueError:
            return []
    ladder = ladder.partition(":")[0]  # a run of LADDER:AGENT reads LADDER's slates
    steps = trace.get("steps") if isinstance(trace, dict) else None
    out: dict[str, None] = {}
    for step in steps if isinstance(steps, list) else []:
        touched: list[tuple[Any, Any]] = []
        reads = step.get("slate_reads") if isinstance(step, dict) else None
        for read in reads if isinstance(reads, list) else []:
            touched.append((read, read.get("metatag") if isinstance(read, dict) else None))
        writes = step.get("writes") if isinstance(step, dict) else None
        for write in writes if isinstance(writes, list) else []:
            if not isinstance(write, dict):
                continue
            target = write.get("to")
            touched.append((target if isinstance(target, dict) else write, None))
            evicted = write.get("evictions")
            touched.extend((e, None) for e in (evicted if isinstance(evicted, list) else []))
        for where, metatag in touched:
            if not isinstance(where, dict) or not isinstance(where.get("slate"), str):
                continue
            for user in dict.fromkeys(("", unicodedata.normalize("NFC", user_id))):
                for item in _access(ladder, user, where, metatag):
                    out.setdefault(item)
    return list(out)


def upgrade() -> None:
    conn = op.get_bind()
    reads = sa.table(
        "ladder_run_reads",
        *(sa.column(c, sa.String()) for c in ("tenant_id", "run_id", "item_id", "runtime_id")),
        *(sa.column(c, sa.String()) for c in ("user_id", "agent_id")),
    )
    after = -1
    while True:
        runs = conn.execute(
            sa.text(
                "SELECT seq, tenant_id, id, ladder, user_id, trace FROM ladder_runs "
                "WHERE seq > :after AND trace IS NOT NULL ORDER BY seq LIMIT :n"
            ),
            {"after": after, "n": BATCH},
        ).all()
        if not runs:
            break
        after = runs[-1][0]
        rows = [
            {
                "tenant_id": t,
                "run_id": r,
                "item_id": i,
                "runtime_id": "",
                "user_id": "",
                "agent_id": "",
            }
            for _, t, r, ladder, user, trace in runs
            for i in _items(trace, ladder or "", user or "")
        ]
        if rows:
            conn.execute(sa.insert(reads), rows)


def downgrade() -> None:
    op.execute("DELETE FROM ladder_run_reads WHERE item_id LIKE 'slate:%'")
