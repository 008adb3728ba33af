"""``cairn subjects``: list subjects and delete one (everything it holds)."""

from __future__ import annotations

import typer
from rich.markup import escape
from rich.table import Table

from cairn.cli._client import API_KEY, DATABASE_URL, JSON, URL, connected, dump
from cairn.cli._common import EXIT_FAILED, console, err_console, print_json, whole_column

app = typer.Typer(help="List and delete subjects.", no_args_is_help=True)


@app.command("list")
def list_subjects(
    prefix: str | None = typer.Option(None, "--prefix", help="Only ids starting with this."),
    limit: int = typer.Option(100, "--limit", min=1, max=1000),
    offset: int = typer.Option(0, "--offset", min=0),
    url: str | None = URL,
    api_key: str | None = API_KEY,
    database_url: str | None = DATABASE_URL,
    as_json: bool = JSON,
) -> None:
    """Subjects of your tenant with their episode and memory counts.

    Example: cairn subjects list --prefix locomo
    """
    with connected(url, api_key, database_url, as_json) as client:
        result = client.subjects.list(limit=limit, offset=offset, prefix=prefix)
    if as_json:
        print_json(dump(result))
        return
    table = Table()
    whole_column(
        table,
        "subject",
        width=min(36, max((len(s.subject_id) for s in result.subjects), default=7)),
    )
    table.add_column("episodes")
    table.add_column("memories")
    for s in result.subjects:
        table.add_row(escape(s.subject_id), str(s.episode_count), str(s.memory_count))
    console.print(table)
    console.print(f"[dim]{result.total} subject(s)[/]")


@app.command("delete")
def delete_subject(
    subject_id: str = typer.Argument(..., help="The subject to delete."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    url: str | None = URL,
    api_key: str | None = API_KEY,
    database_url: str | None = DATABASE_URL,
    as_json: bool = JSON,
) -> None:
    """Delete everything of a subject in your tenant (episodes, memories, ...).

    Example: cairn subjects delete user-1 --yes
    """
    if not yes and not typer.confirm(f"Delete everything of {subject_id!r}?"):
        err_console.print("not deleted")
        raise typer.Exit(EXIT_FAILED)
    with connected(url, api_key, database_url, as_json) as client:
        result = client.subjects.delete(subject_id)
    if as_json:
        print_json(dump(result))
        return
    console.print(
        f"deleted {result.subject_id}: {result.episodes_deleted} episode(s), "
        f"{result.memories_deleted} memory(ies)"
    )
