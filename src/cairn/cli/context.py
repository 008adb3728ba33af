"""``cairn context``: the ranked, token-bounded context Cairn would give a model now."""

from __future__ import annotations

import typer
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from cairn.cli._client import API_KEY, DATABASE_URL, JSON, URL, connected, dump
from cairn.cli._common import console, print_json, visible, whole_column, write_text


def context(
    subject_id: str = typer.Argument(..., help="The subject to assemble context for."),
    task: str = typer.Argument(..., help="What the model is about to do (the query)."),
    max_tokens: int | None = typer.Option(
        None, "--max-tokens", min=1, help="Token budget of the rendered context."
    ),
    session: str | None = typer.Option(None, "--session", help="Conversation (session_id)."),
    text_only: bool = typer.Option(False, "--text", help="Print only the rendered context."),
    url: str | None = URL,
    api_key: str | None = API_KEY,
    database_url: str | None = DATABASE_URL,
    as_json: bool = JSON,
) -> None:
    """Assemble context for a subject and a task (POST /v1/context).

    Example: cairn context user-1 "plan a tea party" --max-tokens 500
    """
    with connected(url, api_key, database_url, as_json) as client:
        bundle = client.context(subject_id, task, max_tokens=max_tokens, session_id=session)
    if as_json:
        print_json(dump(bundle))
        return
    if text_only:
        write_text(bundle.assembled_context + "\n")
        return
    items = bundle.provenance.get("items", [])
    table = Table("#", "kind", "source", "score", "tokens")
    whole_column(table, "id")
    for n, item in enumerate(items, 1):
        table.add_row(
            str(n),
            escape(str(item.get("kind"))),
            str(item.get("source_class")),
            f"{float(item.get('score') or 0):.3f}",
            str(item.get("token_count")),
            str(item.get("id")),
        )
    console.print(table)
    body = (
        Text(visible(bundle.assembled_context))
        if bundle.assembled_context
        else Text("(empty)", "dim")
    )
    console.print(
        Panel(
            body,
            title=f"context for {escape(subject_id)}",
            subtitle=f"{bundle.token_estimate} tokens",
        )
    )
    if bundle.provenance.get("truncated"):
        console.print("[dim]some candidates did not fit the budget[/]")
