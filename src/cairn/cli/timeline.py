"""``cairn timeline``: a subject's episodes and memories in time order."""

from __future__ import annotations

import json

import typer
from rich.markup import escape
from rich.table import Table

from cairn.cli._client import API_KEY, DATABASE_URL, JSON, URL, connected, dump
from cairn.cli._common import console, print_json
from cairn.core.analysis import cut_text


def _short(value: object, width: int = 80) -> str:
    """One line of at most ``width`` characters (cut between graphemes: a flag, an emoji
    family or an accented letter stays whole or goes), escaped so stored text is never Rich
    markup."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return escape(text if len(text) <= width else cut_text(text, width - 1) + "…")


def timeline(
    subject_id: str = typer.Argument(..., help="The subject (e.g. user-1)."),
    limit: int = typer.Option(50, "--limit", min=1, max=1000, help="Items of each list."),
    offset: int = typer.Option(0, "--offset", min=0, help="Skip this many of each list."),
    url: str | None = URL,
    api_key: str | None = API_KEY,
    database_url: str | None = DATABASE_URL,
    as_json: bool = JSON,
) -> None:
    """Show a subject's episodes and memories in time order.

    Example: cairn timeline user-1 --limit 20
    """
    with connected(url, api_key, database_url, as_json) as client:
        result = client.timeline(subject_id, limit=limit, offset=offset)
    if as_json:
        print_json(dump(result))
        return
    episodes = Table(
        "occurred",
        "type",
        "source",
        "session",
        "payload",
        title=f"episodes of {escape(subject_id)}",
        title_justify="left",
    )
    for e in result.episodes:
        episodes.add_row(
            f"{e.occurred_at:%Y-%m-%d %H:%M:%S}",
            _short(e.type),
            _short(e.source),
            _short(e.session_id or ""),
            _short(e.payload),
        )
    console.print(episodes)
    if result.episodes_has_more:
        console.print(f"[dim]more episodes: --offset {offset + limit}[/]")
    memories = Table(
        "kind",
        "status",
        "conf",
        "content",
        title=f"memories of {escape(subject_id)}",
        title_justify="left",
    )
    for m in result.memories:
        memories.add_row(_short(m.kind), m.status, f"{m.confidence:.2f}", _short(m.content))
    console.print(memories)
    if result.memories_has_more:
        console.print(f"[dim]more memories: --offset {offset + limit}[/]")
