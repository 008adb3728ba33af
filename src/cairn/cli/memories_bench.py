"""``cairn bench locomo`` and ``cairn bench memories`` (compile throughput, search latency)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from cairn.cli._common import err_console, fail


def locomo_command(
    data: Path = typer.Option(
        ...,
        "--data",
        exists=True,
        dir_okay=False,
        help="A LoCoMo JSON file, e.g. ../shared/data/locomo/locomo-dev.json.",
    ),
    embedder: str = typer.Option("none", "--embedder", help="none, local or hashing."),
    limit: int = typer.Option(200, "--limit", min=10, help="Results asked of search per question."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    through: str = typer.Option(
        "search", "--through", help="search, or context: recall of the packed context."
    ),
) -> None:
    """Evidence recall within token budgets on LoCoMo (each conversation is one subject).

    Example: cairn bench locomo --data ../shared/data/locomo/locomo-dev.json --embedder local
    """
    from cairn.bench.locomo import format_table, run
    from cairn.bench.memories import embedder_named

    try:
        emb = embedder_named(embedder)
        if through == "context":  # cairn.bench.locomo_context: the same data, through context
            from cairn.bench.locomo_context import run as run_through_context

            report = run_through_context(
                data,
                embedder=emb,
                candidates=limit,
                progress=None if as_json else err_console.print,
            )
        elif through == "search":
            report = run(
                data, embedder=emb, limit=limit, progress=None if as_json else err_console.print
            )
        else:
            raise typer.BadParameter("--through must be search or context")
    except Exception as exc:
        raise fail(exc) from exc
    if as_json:
        sys.stdout.write(json.dumps(report.to_json()) + "\n")
    else:
        sys.stdout.write(format_table(report) + "\n")


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
