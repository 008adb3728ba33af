"""``cairn keys``: create, list and revoke API keys."""

from __future__ import annotations

import typer
from rich.table import Table

from cairn.cli._common import (
    console,
    err_console,
    esc,
    fail,
    print_json,
    settings_with,
    whole_column,
)
from cairn.store import open_store

app = typer.Typer(help="Manage API keys (each belongs to one tenant).", no_args_is_help=True)

DB_OPTION = typer.Option(None, "--database-url", help="Database URL (default: CAIRN_DATABASE_URL).")


@app.command("create")
def create(
    tenant: str = typer.Option(..., "--tenant", help="Tenant the key belongs to (made if new)."),
    name: str = typer.Option("", "--name", help="A label to recognise the key by."),
    database_url: str | None = DB_OPTION,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Create a key and print it once; only its hash is stored.

    Example: cairn keys create --tenant acme --name ci
    """
    settings = settings_with(database_url=database_url)
    store = open_store(settings.resolved_database_url())
    try:
        key, info = store.keys.create(tenant, name=name)
    except Exception as exc:
        raise fail(exc) from exc
    finally:
        store.close()
    if as_json:
        print_json({"key": key, "id": info.id, "tenant": tenant, "prefix": info.prefix})
        return
    console.print(key, soft_wrap=True, highlight=False)
    err_console.print(f"[dim]key {info.id} for tenant '{esc(tenant)}'; it is not shown again.[/]")


@app.command("list")
def list_keys(
    tenant: str | None = typer.Option(None, "--tenant", help="Only this tenant's keys."),
    database_url: str | None = DB_OPTION,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """List keys (id, tenant, prefix, name, created, revoked).

    Example: cairn keys list --tenant acme
    """
    settings = settings_with(database_url=database_url)
    store = open_store(settings.resolved_database_url())
    try:
        keys = store.keys.list(tenant)
    finally:
        store.close()
    if as_json:
        print_json(
            [
                {
                    "id": k.id,
                    "tenant": k.tenant_id,
                    "prefix": k.prefix,
                    "name": k.name,
                    "created_at": k.created_at.isoformat(),
                    "revoked_at": k.revoked_at.isoformat() if k.revoked_at else None,
                }
                for k in keys
            ]
        )
        return
    table = Table()
    whole_column(table, "id")
    for header in ("tenant", "prefix"):
        whole_column(table, header)
    for header in ("name", "created", "revoked"):
        table.add_column(header)
    for k in keys:
        table.add_row(
            k.id,
            k.tenant_id,
            k.prefix + "…",
            k.name,
            f"{k.created_at:%Y-%m-%d %H:%M}",
            f"{k.revoked_at:%Y-%m-%d %H:%M}" if k.revoked_at else "",
        )
    console.print(table)


@app.command("revoke")
def revoke(
    key_id: str = typer.Argument(..., help="The key's id or printed prefix."),
    database_url: str | None = DB_OPTION,
) -> None:
    """Revoke a key; requests with it get 403 invalid_api_key from then on.

    Example: cairn keys revoke 01a2…
    """
    settings = settings_with(database_url=database_url)
    store = open_store(settings.resolved_database_url())
    try:
        count = store.keys.revoke(key_id)
    finally:
        store.close()
    if count == 0:
        err_console.print(f"[red]no active key matches {esc(repr(key_id))}[/]")
        raise typer.Exit(1)
    console.print(f"revoked {count} key(s)")
