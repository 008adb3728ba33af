"""The scale table: the issue's HTTP benchmark (Statewave's script, the same steps) on each
backend, through a real ``cairn serve`` on loopback with default settings.

For each backend and mode (``lexical``: ``CAIRN_EMBEDDER=none``; ``hybrid``: the default
embedder, whose vectors are written in the background, so measured right after the compile
most memories of a big subject have none yet), one fresh server and database:

1. optionally ``fill`` episodes spread over ``fill_subjects`` other subjects of the same tenant
   (ingested and compiled like the rest), so the subjects measured share the tenant's tables
   with many more rows;
2. each measured subject (1,000 and 10,000 episodes by default, more with ``--size``):
   ``POST /v1/episodes/batch`` of 100 episodes (4 in flight; the 10,000 subject's rate is the
   ingest row), then ``POST /v1/memories/compile`` until ``has_more`` is false;
3. right after (no VACUUM, no ANALYZE, no settling; with ``settle_s``, hybrid mode first waits
   until every measured subject's memories have vectors, for at most that long): ``contexts``
   sequential
   ``POST /v1/context {"subject_id", "task", "max_tokens": 1000}`` per subject and ``searches``
   sequential ``GET /v1/memories/search?subject_id=&q=`` (``hybrid=true`` in hybrid mode) on
   the largest subject, after 20 unmeasured warm-up calls of each;
4. the server's RSS (``/proc``) at the end, and its peak; in hybrid mode also the share of the
   largest subject's memories that had a vector when the measuring began.

Episodes are one user turn each: a speaker and an 8-24 word sentence over a Zipf vocabulary
(``cairn.bench.context``); queries are 3-7 content words of it (searches 1-3).
"""

from __future__ import annotations

import asyncio
import json
import random
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from cairn.bench.context import percentiles, query_text, sentence
from cairn.bench.ingest import post_concurrently
from cairn.bench.recall import HarnessError, VectorProbe, compile_subject
from cairn.bench.server import rss_mb, scratch_postgres, server_process
from cairn.config import Settings

PG_DEFAULT = "postgresql://postgres@127.0.0.1:5432/postgres"
SIZES = (1_000, 10_000)
MODES = {"lexical": {"CAIRN_EMBEDDER": "none"}, "hybrid": {}}
WARMUP = 20
T0 = datetime(2024, 1, 1, tzinfo=UTC)
SPEAKERS = ("Caroline", "Melanie", "Jon", "Gina")

Progress = Callable[[str], None]


def episodes(subject: str, n: int, seed: int) -> Iterator[dict[str, Any]]:
    """``n`` one-turn episodes of ``subject``, 40 to a session, a minute apart."""
    rng = random.Random(seed)
    for i in range(n):
        speaker = rng.choice(SPEAKERS)
        yield {
            "subject_id": subject,
            "source": "bench",
            "type": "conversation.turn",
            "session_id": f"{subject}-s{i // 40}",
            "occurred_at": (T0 + timedelta(minutes=i)).isoformat(),
            "payload": {
                "messages": [
                    {"role": "user", "name": speaker, "content": sentence(rng, rng.randint(8, 24))}
                ]
            },
        }


def load_subject(
    base: str, client: httpx.Client, subject: str, n: int, seed: int
) -> dict[str, Any]:
    """Ingest ``n`` episodes in batches of 100 (4 in flight) and compile them."""
    items = list(episodes(subject, n, seed))
    batches = [("/v1/episodes/batch", {"episodes": items[i : i + 100]}) for i in range(0, n, 100)]
    key = client.headers.get("x-api-key")  # the client's API key, if it sends one
    headers = {"X-API-Key": key} if key else None
    ingest_s = asyncio.run(post_concurrently(base, batches, 4, headers))
    t0 = time.perf_counter()
    memories = compile_subject(client, subject)
    return {
        "episodes": n,
        "memories": memories,
        "ingest_eps": n / ingest_s,
        "compile_eps": n / (time.perf_counter() - t0),
    }


def _summary(calls: int, call: Callable[[int], httpx.Response]) -> dict[str, Any]:
    times, found = _timed(calls, call)
    if found < calls // 2:
        # A request that finds nothing is fast: refuse to report such a run.
        raise HarnessError(f"only {found} of {calls} calls found a memory: nothing is searched")
    p50, p95 = percentiles(times)
    return {"p50": p50, "p95": p95, "found": found, "calls": calls}


def _timed(calls: int, call: Callable[[int], httpx.Response]) -> tuple[list[float], int]:
    """Latencies (ms) of ``calls`` calls after ``WARMUP`` unmeasured ones, and how many of
    the measured calls found something (a context or search that finds nothing is fast)."""
    times, found = [], 0
    for i in range(calls + WARMUP):
        t0 = time.perf_counter()
        response = call(i)
        elapsed = (time.perf_counter() - t0) * 1000
        if response.status_code >= 300:
            raise HarnessError(f"{response.request.url} → {response.status_code}")
        if i >= WARMUP:
            times.append(elapsed)
            body = response.json()
            found += bool(body.get("memories") or body.get("facts"))
    return times, found


def measure_context(client: httpx.Client, subject: str, calls: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)

    def call(_: int) -> httpx.Response:
        body = {"subject_id": subject, "task": query_text(rng, rng.randint(3, 7))}
        return client.post("/v1/context", json={**body, "max_tokens": 1000})

    return _summary(calls, call)


def measure_search(
    client: httpx.Client, subject: str, calls: int, seed: int, hybrid: bool
) -> dict[str, Any]:
    rng = random.Random(seed)

    def call(_: int) -> httpx.Response:
        params: dict[str, Any] = {"subject_id": subject, "q": query_text(rng, rng.randint(1, 3))}
        if hybrid:
            params["hybrid"] = "true"
        return client.get("/v1/memories/search", params=params)

    return _summary(calls, call)


@contextmanager
def _database(backend: str, pg_url: str) -> Iterator[str]:
    if backend == "sqlite":
        yield ""  # the server's default SQLite file in its fresh data directory
    elif backend == "postgres":
        with scratch_postgres(pg_url, prefix="cairn_scale") as url:
            yield url
    else:
        raise ValueError(f"unknown backend {backend!r} (sqlite or postgres)")


def run_one(
    backend: str,
    mode: str,
    *,
    sizes: tuple[int, ...] = SIZES,
    fill: int = 0,
    fill_subjects: int = 100,
    contexts: int = 250,
    searches: int = 200,
    pg_url: str = PG_DEFAULT,
    settle_s: float = 0.0,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """One backend in one mode: a fresh server and database, every step of the table."""
    say = progress or (lambda _: None)
    out: dict[str, Any] = {"backend": backend, "mode": mode, "fill": fill, "subjects": {}}
    with (
        tempfile.TemporaryDirectory() as data_dir,
        _database(backend, pg_url) as url,
        server_process(url, env=MODES[mode], data_dir=Path(data_dir), default_settings=True) as (
            base,
            pid,
        ),
        httpx.Client(base_url=base, timeout=600) as client,
    ):
        out["rss_start_mb"] = rss_mb(pid).get("rss")
        if fill:
            t0 = time.perf_counter()
            per = max(1, fill // fill_subjects)
            for k in range(fill_subjects):
                load_subject(base, client, f"fill-{k}", per, seed=1000 + k)
                say(f"{backend}/{mode}: filler subject {k + 1}/{fill_subjects} loaded")
            out["fill_s"] = time.perf_counter() - t0
        for n in sizes:
            subject = f"subject-{n}"
            out["subjects"][n] = load_subject(base, client, subject, n, seed=n)
            say(f"{backend}/{mode}: {n:,} episodes → {out['subjects'][n]['memories']:,} memories")
        if mode == "hybrid":
            database = Settings(data_dir=Path(data_dir), database_url=url).resolved_database_url()
            out["vectors"] = _vectors_when_measured(database, sizes, settle_s)
            say(f"{backend}/{mode}: {out['vectors']:.1%} of the vectors written, measuring")
        for n in sizes:
            ctx = measure_context(client, f"subject-{n}", contexts, 11)
            out["subjects"][n]["context"] = ctx
            say(f"{backend}/{mode}: context at {n:,}: p50 {ctx['p50']:.1f} p95 {ctx['p95']:.1f} ms")
        largest = max(sizes)
        out["search"] = measure_search(
            client, f"subject-{largest}", searches, 13, hybrid=mode == "hybrid"
        )
        out["search_subject"] = largest
        mem = rss_mb(pid)
        out["rss_mb"], out["rss_peak_mb"] = mem.get("rss"), mem.get("hwm")
    return out


def _vectors_when_measured(database_url: str, sizes: tuple[int, ...], settle_s: float) -> float:
    """The share of the largest subject's memories with a vector, after waiting up to
    ``settle_s`` for every measured subject's vectors (read beside the server: a snapshot)."""
    probe = VectorProbe(database_url)
    try:
        deadline = time.monotonic() + settle_s
        while time.monotonic() < deadline and any(probe.share(f"subject-{n}") < 1.0 for n in sizes):
            time.sleep(1.0)
        return probe.share(f"subject-{max(sizes)}")
    finally:
        probe.close()


def _cell(value: float | None, fmt: str = "{:.1f}") -> str:
    return "n/a" if value is None else fmt.format(value)


def markdown(results: list[dict[str, Any]]) -> str:
    """The table: one column per backend and mode, one row per figure."""
    heads = [f"{r['backend']} {r['mode']}" for r in results]
    lines = ["| figure | " + " | ".join(heads) + " |", "|---|" + "---|" * len(heads)]
    sizes = sorted({int(n) for r in results for n in r["subjects"]})

    def row(name: str, cell: Callable[[dict[str, Any]], str]) -> None:
        lines.append(f"| {name} | " + " | ".join(cell(r) for r in results) + " |")

    def context_of(n: int) -> Callable[[dict[str, Any]], str]:
        return lambda r: _pair(r["subjects"].get(n, {}).get("context"))

    def memories_of(n: int) -> Callable[[dict[str, Any]], str]:
        return lambda r: _cell(r["subjects"].get(n, {}).get("memories"), "{:,}")

    for n in sorted(sizes, reverse=True):
        row(f"context p50 / p95 ms, {n:,}-episode subject", context_of(n))
    for n in sorted(sizes, reverse=True):
        row(f"memories of the {n:,}-episode subject", memories_of(n))
    row(
        "keyword search p50 / p95 ms, largest subject",
        lambda r: _pair(r.get("search")),
    )
    row(
        "batch ingest (100/batch) episodes/s, largest subject",
        lambda r: _cell(r["subjects"][max(r["subjects"])]["ingest_eps"], "{:,.0f}"),
    )
    row(
        "compile episodes/s, largest subject",
        lambda r: _cell(r["subjects"][max(r["subjects"])]["compile_eps"], "{:,.0f}"),
    )
    row("other episodes in the tenant", lambda r: f"{r['fill']:,}")
    if any("vectors" in r for r in results):
        row(
            "vectors written when measured, largest subject",
            lambda r: _cell(100 * r["vectors"], "{:.0f} %") if "vectors" in r else "n/a",
        )
    row("server RSS after the run MB (peak)", lambda r: _rss(r))
    return "\n".join(lines)


def _pair(m: dict[str, Any] | None) -> str:
    return "n/a" if not m else f"{m['p50']:.1f} / {m['p95']:.1f}"


def _rss(r: dict[str, Any]) -> str:
    return f"{_cell(r.get('rss_mb'), '{:.0f}')} ({_cell(r.get('rss_peak_mb'), '{:.0f}')})"


def run(
    backends: tuple[str, ...],
    modes: tuple[str, ...],
    *,
    sizes: tuple[int, ...] = SIZES,
    fill: int = 0,
    fill_subjects: int = 100,
    contexts: int = 250,
    searches: int = 200,
    pg_url: str = PG_DEFAULT,
    settle_s: float = 0.0,
    as_json: bool = False,
    progress: Progress | None = None,
) -> list[dict[str, Any]]:
    """Every backend in every mode; prints the markdown table (and JSON if asked)."""
    results = [
        run_one(
            backend,
            mode,
            sizes=sizes,
            fill=fill,
            fill_subjects=fill_subjects,
            contexts=contexts,
            searches=searches,
            pg_url=pg_url,
            settle_s=settle_s,
            progress=progress,
        )
        for mode in modes
        for backend in backends
    ]
    print(markdown(results))
    if as_json:
        print(json.dumps(results, indent=2, default=str))
    return results
