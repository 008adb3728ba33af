"""``cairn bench memories``: compile throughput and search latency."""

from __future__ import annotations

import typer

from cairn.cli._common import fail


def memories_command(
    memories: int = typer.Option(10_000, "--memories", help="Memories in the one subject."),
    queries: int = typer.Option(500, "--queries", help="Searches measured per mode."),
    embedder: str = typer.Option("none", "--embedder", help="none, local or hashing."),
    backend: list[str] = typer.Option(["sqlite"], "--backend", help="sqlite and/or postgres."),
    pg_url: str = typer.Option(
        "postgresql://postgres@127.0.0.1:5432/postgres",
        help="PostgreSQL server (a scratch database is made on it).",
    ),
    tenants: int = typer.Option(
        1,
        "--tenants",
        min=1,
        help="Tenants in the database (the others hold one memory "
        "each; on SQLite each has its own full-text index).",
    ),
) -> None:
    """Heuristic compile episodes/s and search p50/p95 with N memories in one subject.

    Example: cairn bench memories --memories 10000 --embedder local
    """
    from cairn.bench.memories import embedder_named, run

    try:
        run(
            memories=memories,
            queries=queries,
            embedder=embedder_named(embedder),
            backends=tuple(backend),
            pg_url=pg_url,
            tenants=tenants,
        )
    except Exception as exc:
        raise fail(exc) from exc
