"""``cairn``: run the server and workers, migrate, manage keys, and use Cairn from a shell."""

from __future__ import annotations

import ipaddress
import logging

import typer

from cairn import __version__
from cairn.cli import bench, keys
from cairn.cli import context as context_cli
from cairn.cli import ingest as ingest_cli
from cairn.cli import ladders as ladders_cli
from cairn.cli import mcp as mcp_cli
from cairn.cli import search as search_cli
from cairn.cli import slates as slates_cli
from cairn.cli import subjects as subjects_cli
from cairn.cli import templates as templates_cli
from cairn.cli import timeline as timeline_cli
from cairn.cli import worker as worker_cli
from cairn.cli._common import console, err_console, fail, settings_with

app = typer.Typer(
    help="Cairn: a memory runtime for AI agents.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        console.print(__version__, highlight=False)
        raise typer.Exit()


@app.callback()
def main(
    version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="Print the version."
    ),
) -> None:
    """Cairn: a memory runtime for AI agents."""


app.add_typer(keys.app, name="keys")
app.add_typer(bench.app, name="bench")
app.command("ingest")(ingest_cli.ingest)
app.command("timeline")(timeline_cli.timeline)
app.command("search")(search_cli.search)
app.command("context")(context_cli.context)
app.add_typer(subjects_cli.app, name="subjects")
app.command("mcp")(mcp_cli.mcp)
app.command("worker")(worker_cli.worker)
app.add_typer(templates_cli.app, name="templates")
app.add_typer(slates_cli.app, name="slates")
app.add_typer(ladders_cli.app, name="ladders")


def is_loopback(host: str) -> bool:
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@app.command()
def version() -> None:
    """Print the version."""
    console.print(__version__)


@app.command()
def serve(
    host: str | None = typer.Option(None, "--host", help="Bind address (CAIRN_HOST)."),
    port: int | None = typer.Option(None, "--port", help="Port (CAIRN_PORT)."),
    database_url: str | None = typer.Option(None, "--database-url", help="CAIRN_DATABASE_URL."),
    workers: int = typer.Option(1, "--workers", min=1, help="Server processes."),
) -> None:
    """Run the HTTP server (API, inspector at /ui). Migrations run first.

    Example: cairn serve --port 8100
    """
    import uvicorn

    from cairn.services import Services

    settings = settings_with(host=host, port=port, database_url=database_url)
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(levelname)s %(name)s %(message)s"
    )
    try:
        services = Services.from_settings(settings)
    except Exception as exc:
        raise fail(exc) from exc
    auth = services.auth_required()
    services.close()
    if not auth:
        if not is_loopback(settings.host):
            err_console.print(
                f"[bold red]refusing to bind {settings.host}:[/] no API key is configured. "
                "Create one with 'cairn keys create --tenant NAME' or set CAIRN_API_KEY."
            )
            raise typer.Exit(1)
        err_console.print(
            "[yellow]No API key configured: the server is OPEN (tenant 'default') for local "
            "development, bound to loopback only.[/]"
        )
    err_console.print(
        f"Cairn {__version__} on http://{settings.host}:{settings.port} "
        f"({settings.resolved_database_url().split(':', 1)[0]})"
    )
    if workers > 1:
        uvicorn.run(
            "cairn.api.asgi:app",
            host=settings.host,
            port=settings.port,
            workers=workers,
            log_level="warning",
            access_log=False,
        )
    else:
        from cairn.api.app import create_app

        uvicorn.run(
            create_app(settings),
            host=settings.host,
            port=settings.port,
            log_level="warning",
            access_log=False,
        )


@app.command()
def migrate(
    database_url: str | None = typer.Option(None, "--database-url", help="CAIRN_DATABASE_URL."),
) -> None:
    """Apply pending database migrations.

    Example: cairn migrate --database-url postgresql://localhost/cairn
    """
    from cairn.store.database import Database

    settings = settings_with(database_url=database_url)
    try:
        db = Database(settings.resolved_database_url())
        applied = db.migrate()
        db.dispose()
    except Exception as exc:
        raise fail(exc) from exc
    console.print(f"applied: {', '.join(applied)}" if applied else "up to date")


if __name__ == "__main__":  # pragma: no cover
    app()
