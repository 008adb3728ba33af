"""Compile speed in process, and a dump of what was compiled to compare two versions.

One subject of ``--n`` episodes (``cairn bench scale``'s generator: one-turn episodes, 40 to a
session), stored through the store, then compiled as ``POST /v1/memories/compile`` does it
(``compile_request`` until nothing is left), timed: episodes/s, this process's CPU seconds and,
on PostgreSQL, the CPU seconds of the database's server processes. The first and the last
request's rate show whether a step gets slower as the subject grows.

``--dump FILE`` writes every memory (JSON lines, by id: kind, content, hashes, status,
supersession, metadata, analysed text, and the sources as the episodes' idempotency keys, so
two runs compare) and prints its digest; on PostgreSQL it also checks that
``memory_term_stats`` equals a pass over the rows.

Usage: PYTHONPATH=src python bench/compile_check.py --backend postgres --n 10000 --dump a.jsonl
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, text

from cairn.bench.scale import episodes
from cairn.core.episodes import NewEpisode
from cairn.core.scope import Scope
from cairn.engine.compile import compile_request
from cairn.store import Store, open_store
from cairn.store.scratch import scratch_database

TENANT = "bench"
COLUMNS = (
    "id, tenant_id, runtime_id, user_id, agent_id, session_id, kind, content, summary, "
    "confidence, valid_from, valid_to, status, source_episode_ids, metadata, content_hash, "
    "superseded_by, search_text"
)
TERM_PASS = """
    SELECT tenant_id, runtime_id, user_id, agent_id, term, kind, status, count(*) FROM (
        SELECT tenant_id, runtime_id, user_id, agent_id, u.lexeme AS term, kind, status
        FROM memories CROSS JOIN LATERAL unnest(fts) u WHERE status IN ('active', 'superseded')
        UNION ALL
        SELECT tenant_id, runtime_id, user_id, agent_id, '', kind, status
        FROM memories WHERE status IN ('active', 'superseded')
    ) t GROUP BY 1, 2, 3, 4, 5, 6, 7 ORDER BY 1, 2, 3, 4, 5, 6, 7
"""


def new_episodes(subject: str, n: int, seed: int) -> Iterator[NewEpisode]:
    scope = Scope.for_subject(subject)
    for i, e in enumerate(episodes(subject, n, seed)):
        yield NewEpisode(
            scope=scope,
            source=e["source"],
            type=e["type"],
            payload=e["payload"],
            session_id=e["session_id"],
            idempotency_key=f"k{i}",
            occurred_at=datetime.fromisoformat(e["occurred_at"]),
        )


def server_cpu(conn: Connection, dbname: str) -> float:
    """CPU seconds of the server processes connected to ``dbname`` (this machine only)."""
    pids = conn.execute(
        text("SELECT pid FROM pg_stat_activity WHERE datname = :d"), {"d": dbname}
    ).scalars()
    ticks = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])
        except OSError:
            pass
    return ticks / os.sysconf("SC_CLK_TCK")


def _plain(row: dict[str, Any], keys: dict[str, str]) -> dict[str, Any]:
    def loaded(v: Any) -> Any:
        return json.loads(v) if isinstance(v, str) else v

    def when(v: Any) -> str | None:
        v = datetime.fromisoformat(v) if isinstance(v, str) else v
        return v.replace(tzinfo=None).isoformat() if v is not None else None

    out = dict(row)
    out["source_episode_ids"] = [
        keys.get(str(uuid.UUID(str(x))), f"?{x}") for x in loaded(row["source_episode_ids"])
    ]
    out["metadata"] = loaded(row["metadata"])
    for k in ("id", "superseded_by"):
        out[k] = str(uuid.UUID(str(row[k]))) if row[k] is not None else None
    out["valid_from"], out["valid_to"] = when(row["valid_from"]), when(row["valid_to"])
    out["confidence"] = round(float(row["confidence"]), 6)
    return out


def dump(store: Store, path: str) -> dict[str, Any]:
    with store.db.read() as conn:
        keys = {
            str(uuid.UUID(str(r[0]))): str(r[1])
            for r in conn.execute(text("SELECT id, idempotency_key FROM episodes"))
        }
        rows = conn.execute(text(f"SELECT {COLUMNS} FROM memories")).mappings().all()
        memories = sorted((_plain(dict(r), keys) for r in rows), key=lambda m: m["id"])
        exact = None
        if not store.db.is_sqlite:
            kept = conn.execute(text("SELECT * FROM memory_term_stats ORDER BY 1,2,3,4,5,6,7"))
            exact = [tuple(r) for r in kept] == [tuple(r) for r in conn.execute(text(TERM_PASS))]
    body = "".join(json.dumps(m, sort_keys=True, default=str) + "\n" for m in memories)
    with open(path, "w") as f:
        f.write(body)
    digest = hashlib.sha256(body.encode()).hexdigest()[:16]
    return {"memories": len(memories), "digest": digest, "term_stats_exact": exact}


def measure(store: Store, dbname: str | None, n: int, seed: int) -> dict[str, Any]:
    items = list(new_episodes("subj", n, seed))
    for start in range(0, n, 1000):
        store.episodes.append_many(TENANT, items[start : start + 1000])
    scope = Scope.for_subject("subj")
    with store.db.read() as conn:
        pg0 = server_cpu(conn, dbname) if dbname else 0.0
    cpu0, wall0 = time.process_time(), time.perf_counter()
    steps: list[tuple[int, float]] = []
    while True:
        t0 = time.perf_counter()
        result = compile_request(store, TENANT, scope)
        steps.append((result.episodes_compiled, time.perf_counter() - t0))
        if not result.has_more:
            break
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    with store.db.read() as conn:
        pg1 = server_cpu(conn, dbname) if dbname else 0.0
    return {
        "episodes_per_s": round(n / wall),
        "wall_s": round(wall, 2),
        "process_cpu_s": round(cpu, 2),
        "server_cpu_s": round(pg1 - pg0, 2) if dbname else None,
        "first_request_eps": round(steps[0][0] / steps[0][1]),
        "last_request_eps": round(steps[-1][0] / steps[-1][1]),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=("sqlite", "postgres"), default="postgres")
    ap.add_argument("--n", type=int, default=10_000, help="episodes of the subject")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--dump", help="write the compiled memories here (JSON lines)")
    ap.add_argument("--pg-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = ap.parse_args()
    database: AbstractContextManager[str]
    if args.backend == "postgres":
        database = scratch_database(args.pg_url, "cairn_compile_check")
    else:
        database = nullcontext(f"sqlite:///{tempfile.mkdtemp(prefix='compile-check-')}/c.db")
    with database as url:
        store = open_store(url)
        try:
            dbname = url.rsplit("/", 1)[1] if args.backend == "postgres" else None
            result = {"backend": args.backend, "episodes": args.n}
            result |= measure(store, dbname, args.n, args.seed)
            if args.dump:
                result |= dump(store, args.dump)
            result["load_average"] = round(os.getloadavg()[0], 2)
            print(json.dumps(result), flush=True)
        finally:
            store.close()


if __name__ == "__main__":
    main()
