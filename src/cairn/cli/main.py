"""``cairn``: run the server and workers, migrate, manage keys, and use Cairn from a shell."""

from __future__ import annotations

import ipaddress
import logging
import os

import typer

from cairn import __version__
from cairn.cli import bench, keys
from cairn.cli import context as context_cli
from cairn.cli import ingest as ingest_cli
from cairn.cli import ladders as ladders_cli
from cairn.cli import lifecycle as lifecycle_cli
from cairn.cli import mcp as mcp_cli
from cairn.cli import search as search_cli
from cairn.cli import slates as slates_cli
from cairn.cli import subjects as subjects_cli
from cairn.cli import templates as templates_cli
from cairn.cli import timeline as timeline_cli
from cairn.cli import worker as worker_cli
from cairn.cli._common import console, err_console, fail, prepare_process, settings_with
from cairn.config import Settings
from cairn.logs import configure_logging

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
app.add_typer(lifecycle_cli.memories_app, name="memories")
app.add_typer(lifecycle_cli.episodes_app, name="episodes")
app.add_typer(lifecycle_cli.scopes_app, name="scopes")
app.add_typer(lifecycle_cli.retention_app, name="retention")
app.command("export")(lifecycle_cli.export)
app.command("import")(lifecycle_cli.import_)


def is_loopback(host: str) -> bool:
    """Whether a bind address listens on loopback only. An empty host binds every interface
    and any other host name may resolve to one, so only ``localhost`` and loopback IPs pass."""
    if host.strip().lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False


@app.command()
def version() -> None:
    """Print the version.

    Example: cairn version
    """
    console.print(__version__)


def _notice(settings: Settings, text: str, style: str = "", level: int = logging.INFO) -> None:
    """A start-up notice: a log record at ``level`` when logs are JSON lines, else a line on
    the console."""
    if settings.log_json:
        logging.getLogger("cairn").log(level, text)
    else:
        err_console.print(text, style=style or None, markup=False, highlight=False, soft_wrap=True)


def _share_metrics() -> None:
    """Give the server processes one fresh directory to pool their metrics in (unless the
    operator named one), so a scrape of any process counts the requests of all of them."""
    import atexit
    import shutil
    import tempfile

    from cairn.metrics import MULTIPROC_ENV

    if os.environ.get(MULTIPROC_ENV):
        return
    directory = tempfile.mkdtemp(prefix="cairn-metrics-")
    os.environ[MULTIPROC_ENV] = directory
    atexit.register(shutil.rmtree, directory, ignore_errors=True)


def _check_port(host: str, port: int) -> None:
    """Exit 1 with a clear message when the address is taken (another server, or one left
    running), before anything starts; uvicorn would exit 3, the code of a configuration
    error."""
    import socket

    try:
        family = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM)[0][0]
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # (as uvicorn binds)
            probe.bind((host, port))
    except OSError as exc:
        err_console.print(
            f"cannot listen on {host or '(every interface)'}:{port}: {exc.strerror or exc} "
            "(is another server running there?)",
            markup=False,
        )
        raise typer.Exit(1) from None


def _hand_over(database_url: str | None, host: str | None, port: int | None) -> None:
    """What the processes of ``serve --workers N`` need from this one: they build their
    settings from the environment (``cairn.asgi``), so what the command line overrode goes
    there too (or they would serve another database), and this process's pid, so that they
    stop with it (``cairn.app.stop_with_parent``)."""
    from cairn.app import SERVE_PARENT_ENV

    for name, value in (
        ("CAIRN_DATABASE_URL", database_url),
        ("CAIRN_HOST", host),
        ("CAIRN_PORT", None if port is None else str(port)),
    ):
        if value is not None:
            os.environ[name] = value
    os.environ[SERVE_PARENT_ENV] = str(os.getpid())


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

    from cairn.app import prepare_server_process
    from cairn.services import Services

    settings = settings_with(host=host, port=port, database_url=database_url)
    prepare_server_process()
    configure_logging(settings.log_level, json_lines=settings.log_json)
    try:
        services = Services.from_settings(settings)
    except Exception as exc:
        raise fail(exc) from exc
    auth = services.auth_required()
    services.close()
    # The app builds its own: this one (its engine, its compiled statements) would otherwise
    # stay referenced by this frame for as long as the server runs.
    del services
    if not auth and not is_loopback(settings.host):
        err_console.print(
            f"[bold red]refusing to bind {settings.host or '(every interface)'}:[/] "
            "no API key is configured. "
            "Create one with 'cairn keys create --tenant NAME' or set CAIRN_API_KEY."
        )
        raise typer.Exit(1)
    _check_port(settings.host, settings.port)  # (before any notice: nothing will serve)
    if not auth:
        _notice(
            settings,
            "No API key configured: the server is OPEN (tenant 'default') for local "
            "development, bound to loopback only.",
            style="yellow",
            level=logging.WARNING,
        )
    banner = (
        f"Cairn {__version__} on http://{settings.host}:{settings.port} "
        f"({settings.resolved_database_url().split(':', 1)[0]})"
    )
    _notice(settings, banner)
    if workers > 1:
        _share_metrics()
        _hand_over(database_url, host, port)
        uvicorn.run(
            "cairn.asgi:app",
            host=settings.host,
            port=settings.port,
            workers=workers,
            log_level="warning",
            log_config=None,
            access_log=False,
        )
    else:
        from cairn.app import create_app, settle_server_heap

        server_app = create_app(settings)
        settle_server_heap()
        uvicorn.run(
            server_app,
            host=settings.host,
            port=settings.port,
            log_level="warning",
            log_config=None,
            access_log=False,
        )


@app.command()
def migrate(
    database_url: str | None = typer.Option(None, "--database-url", help="CAIRN_DATABASE_URL."),
) -> None:
    """Apply pending database migrations.

    Example: cairn migrate --database-url postgresql://localhost/cairn
    """
    from cairn.store import open_store

    settings = settings_with(database_url=database_url)
    try:
        store = open_store(settings.resolved_database_url(), migrate=False)
        try:
            applied = store.migrate()
        finally:
            store.close()
    except Exception as exc:
        raise fail(exc) from exc
    console.print(f"applied: {', '.join(applied)}" if applied else "up to date")


def run() -> None:
    """The ``cairn`` command: the streams and arguments made ready (``prepare_process``), then
    the app."""
    prepare_process()
    app()


if __name__ == "__main__":  # pragma: no cover
    run()
