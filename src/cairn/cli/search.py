"""``cairn search``: a subject's memories ranked by relevance."""

from __future__ import annotations

import typer
from rich.table import Table

from cairn.cli._client import API_KEY, DATABASE_URL, JSON, URL, connected, dump
from cairn.cli._common import console, print_json, whole_column
from cairn.cli.timeline import _short


def search(
    subject_id: str = typer.Argument(..., help="The subject whose memories to search."),
    query: str = typer.Argument(..., help="What to look for."),
    kind: list[str] | None = typer.Option(None, "--kind", help="Only this kind (repeatable)."),
    limit: int = typer.Option(10, "--limit", min=1, max=200, help="Most results."),
    hybrid: bool = typer.Option(False, "--hybrid", help="Lexical + vector (needs an embedder)."),
    semantic: bool = typer.Option(False, "--semantic", help="Vector only (needs an embedder)."),
    url: str | None = URL,
    api_key: str | None = API_KEY,
    database_url: str | None = DATABASE_URL,
    as_json: bool = JSON,
) -> None:
    """Search a subject's compiled memories (each score in [0, 1]).

    Example: cairn search user-1 "what does she drink" --limit 5
    """
    with connected(url, api_key, database_url, as_json) as client:
        result = client.memories.search(
            subject_id, query, kinds=kind, limit=limit, hybrid=hybrid, semantic=semantic
        )
    if as_json:
        print_json(dump(result))
        return
    if not result.memories:
        console.print(
            f"[dim]no memories of {_short(subject_id)} match (compiled yet? "
            f"'cairn ingest --compile' or POST /v1/memories/compile)[/]"
        )
        return
    table = Table("score", "kind", "content")
    whole_column(table, "id")
    for m in result.memories:
        table.add_row(f"{m.score or 0:.3f}", _short(m.kind), _short(m.content, 90), str(m.id))
    console.print(table)
