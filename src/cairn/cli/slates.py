"""``cairn slates``: show, read and write slates of the ladders in ``CAIRN_LADDERS_DIR``.

Works on the database directly (like ``cairn keys``), as the API key's tenant; ``--tenant``
without a key only in open mode, or with ``--database-url`` (the database's operator).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import typer
from rich.table import Table

from cairn.cli._common import (
    TENANT_HELP,
    acting_tenant,
    console,
    esc,
    fail,
    print_json,
    settings_with,
    write_text,
)
from cairn.slates.service import Slates
from cairn.store import open_store

app = typer.Typer(help="Inspect and edit slates (working memory of ladders).", no_args_is_help=True)

DB_OPTION = typer.Option(None, "--database-url", help="Database URL (default: CAIRN_DATABASE_URL).")
LADDERS_OPTION = typer.Option(None, "--ladders-dir", help="Ladder files (CAIRN_LADDERS_DIR).")
TENANT_OPTION = typer.Option(None, "--tenant", help=TENANT_HELP)
API_KEY_OPTION = typer.Option(
    None, "--api-key", envvar="CAIRN_API_KEY", help="API key (CAIRN_API_KEY); decides the tenant."
)
USER_OPTION = typer.Option(None, "--user", help="User of a `partition: user` slate.")


@contextmanager
def open_slates(
    database_url: str | None, ladders_dir: Path | None, tenant: str | None, api_key: str | None
) -> Iterator[tuple[Slates, str]]:
    """The slates, and the tenant to act as (see ``acting_tenant``)."""
    settings = settings_with(database_url=database_url, ladders_dir=ladders_dir)
    try:
        store = open_store(settings.resolved_database_url(), pool_size=settings.db_pool_size)
    except Exception as exc:
        raise fail(exc) from exc
    try:
        acting = acting_tenant(
            store,
            tenant=tenant,
            api_key=api_key,
            database_url=database_url,
            configured_key=settings.api_key,
        )
        # As the server does: an invalid ladder file is reported and the valid ones serve.
        problems: list[str] = []
        slates = Slates(
            store,
            tokenizer=settings.tokenizer,
            ladders_dir=settings.ladders_dir,
            problems=problems,
        )
        for problem in problems:
            typer.echo(f"skipped an invalid ladder file: {problem}", err=True)
        yield slates, acting
    except typer.Exit:
        raise
    except Exception as exc:
        raise fail(exc) from exc
    finally:
        store.close()


@app.command("show")
def show(
    ladder: str = typer.Argument(..., help="Ladder name (file stem or its `name`)."),
    slate: str | None = typer.Argument(None, help="One slate (default: all of the ladder)."),
    user: str | None = USER_OPTION,
    tenant: str | None = TENANT_OPTION,
    api_key: str | None = API_KEY_OPTION,
    as_json: bool = typer.Option(False, "--json", help="Print the trees as JSON."),
    database_url: str | None = DB_OPTION,
    ladders_dir: Path | None = LADDERS_OPTION,
) -> None:
    """Show slates with their usage per folder and file (does not count as a use).

    Example: cairn slates show memory-ladder Memory
    """
    with open_slates(database_url, ladders_dir, tenant, api_key) as (slates, tenant):
        titles = [slate] if slate else [s.title for s in slates.specs(ladder)]
        if not titles:
            slates.spec(ladder, "")  # raises slate_not_found with the ladder's name
        trees = [slates.inspect(tenant, ladder, t, user_id=user) for t in titles]
    if as_json:
        print_json(trees)
        return
    for tree in trees:
        table = Table(
            "folder",
            "file",
            "tokens",
            "limit",
            "policy",
            "entries",
            "tags",
            title=f"{ladder}/{tree['slate']}  {tree['tokens']}/{tree['tokenLimit']}",
        )
        for folder in tree["folders"]:
            table.add_row(
                folder["folder"],
                "",
                str(folder["tokens"]),
                str(folder["tokenLimit"]),
                folder["evictionPolicy"],
                "",
                "",
            )
            for f in folder["files"]:
                table.add_row(
                    "", f["file"], str(f["tokens"]), "", "", str(f["entries"]), ", ".join(f["tags"])
                )
        console.print(table)


@app.command("read")
def read(
    ladder: str = typer.Argument(...),
    slate: str = typer.Argument(...),
    folder: str = typer.Argument(...),
    file: str | None = typer.Argument(None, help="File (omit for the folder's index/tree)."),
    metatag: str | None = typer.Option(None, "--metatag", help="tags, index or tree."),
    depth: int | None = typer.Option(None, "--depth", min=0, help="Cut the tree here."),
    fallback: str | None = typer.Option(None, "--fallback", help="Printed when empty."),
    peek: bool = typer.Option(False, "--peek", help="Do not count as a use (LRU)."),
    user: str | None = USER_OPTION,
    tenant: str | None = TENANT_OPTION,
    api_key: str | None = API_KEY_OPTION,
    database_url: str | None = DB_OPTION,
    ladders_dir: Path | None = LADDERS_OPTION,
) -> None:
    """Print a file's content, or a metatag's JSON.

    Example: cairn slates read memory-ladder Memory facts core.md
    """
    if file is None and metatag is None:
        metatag = "index"
    with open_slates(database_url, ladders_dir, tenant, api_key) as (slates, tenant):
        text = slates.read(
            tenant,
            ladder,
            slate,
            folder,
            file,
            user_id=user,
            metatag=metatag,
            depth=depth,
            fallback=fallback,
            peek=peek,
        )
    write_text(text + ("\n" if text and not text.endswith("\n") else ""))


@app.command("write")
def write(
    ladder: str = typer.Argument(...),
    slate: str = typer.Argument(...),
    folder: str = typer.Argument(...),
    file: str = typer.Argument(...),
    content: str = typer.Argument(..., help="Text to write; '-' reads standard input."),
    on: str = typer.Option("append", "--on", help="append, overwrite or mergeByKey."),
    key: str | None = typer.Option(None, "--key", help="Key field for mergeByKey."),
    tag: list[str] = typer.Option([], "--tag", help="Add a tag to the file (repeatable)."),
    user: str | None = USER_OPTION,
    tenant: str | None = TENANT_OPTION,
    api_key: str | None = API_KEY_OPTION,
    database_url: str | None = DB_OPTION,
    ladders_dir: Path | None = LADDERS_OPTION,
) -> None:
    """Write to a file; prints the folder's usage and any evictions as JSON.

    Example: cairn slates write memory-ladder Memory facts core.md "Paris is in France"
    """
    if content == "-":
        content = sys.stdin.read()
    with open_slates(database_url, ladders_dir, tenant, api_key) as (slates, tenant):
        slates.check_user(ladder, slate, user)
        result = slates.write(
            tenant,
            ladder,
            slate,
            folder,
            file,
            content,
            on=on,
            key=key,
            tags=tag or None,
            user_id=user,
        )
    print_json(result.to_dict())


@app.command("evictions")
def evictions(
    ladder: str = typer.Argument(...),
    slate: str = typer.Argument(...),
    limit: int = typer.Option(20, "--limit", min=1, max=1000),
    user: str | None = USER_OPTION,
    tenant: str | None = TENANT_OPTION,
    api_key: str | None = API_KEY_OPTION,
    database_url: str | None = DB_OPTION,
    ladders_dir: Path | None = LADDERS_OPTION,
    as_json: bool = typer.Option(False, "--json", help="Print the evictions as JSON."),
) -> None:
    """List recorded evictions, newest first (a table; --json for JSON).

    Example: cairn slates evictions memory-ladder Memory --limit 5
    """
    with open_slates(database_url, ladders_dir, tenant, api_key) as (slates, tenant):
        items = slates.evictions(tenant, ladder, slate, user_id=user, limit=limit)
    if as_json:
        print_json([e.to_dict() for e in items])
        return
    table = Table("evicted at", "folder", "file", "tokens", "policy", "run", "preview")
    for e in items:
        where = (e.folder, e.file, str(e.tokens), e.policy, e.run_id or "")
        table.add_row(e.evicted_at.isoformat(timespec="seconds"), *map(esc, where), esc(e.preview))
    console.print(table)
