"""How the data commands reach Cairn: through the SDK, to a server or in-process.

With ``--url`` (or ``CAIRN_URL``) a command talks to that server; without, it runs the app
in this process on the configured database (``--database-url`` / ``CAIRN_DATABASE_URL``), so
the same code path, validation and errors apply either way. The key is ``--api-key`` or
``CAIRN_API_KEY``.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import typer

from cairn.cli._common import EXIT_FAILED, err_console, esc, fail, settings_with
from cairn.errors import CairnError

if TYPE_CHECKING:
    from cairn.client import Cairn

URL = typer.Option(
    None,
    "--url",
    envvar="CAIRN_URL",
    help="Server URL (CAIRN_URL). Without it, work in-process on the configured database.",
)
API_KEY = typer.Option(
    None, "--api-key", envvar="CAIRN_API_KEY", help="API key (CAIRN_API_KEY); decides the tenant."
)
DATABASE_URL = typer.Option(
    None, "--database-url", help="In-process only: database URL (CAIRN_DATABASE_URL)."
)
JSON = typer.Option(False, "--json", help="Print JSON (errors as JSON on stderr).")


def client_error() -> type[Exception]:
    """The SDK's base error (``CairnClientError``), imported when asked for."""
    from cairn.client import CairnClientError

    return CairnClientError


def report_error(error: Exception, as_json: bool) -> typer.Exit:
    """Print an SDK error (code, status, request id) and return exit 1."""
    # The SDK (and httpx) is imported where a command uses it: ``cairn serve`` runs in this
    # process and needs neither (8 MB of the server's RSS).
    from cairn.client import APIConnectionError, APIError

    if isinstance(error, APIError):
        if as_json:
            json_error(error.code, error.message, error.status, error.details, error.request_id)
        else:
            rid = f" [dim](request {error.request_id})[/]" if error.request_id else ""
            err_console.print(
                f"[bold red]error[/] ({error.status} {error.code}): {esc(error.message)}{rid}",
                highlight=False,
            )
            if error.code == "missing_api_key":
                err_console.print(
                    "  give the command a key: --api-key KEY or CAIRN_API_KEY", highlight=False
                )
            if error.code == "validation_error" and isinstance(error.details, list):
                for d in error.details[:10]:
                    err_console.print(
                        f"  {esc(d.get('field'))}: {esc(d.get('message'))}", highlight=False
                    )
        return typer.Exit(EXIT_FAILED)
    if as_json:
        kind = "connection_error" if isinstance(error, APIConnectionError) else "client_error"
        json_error(kind, str(error))
        return typer.Exit(EXIT_FAILED)
    err_console.print(f"[bold red]error:[/] {esc(error)}", highlight=False)
    return typer.Exit(EXIT_FAILED)


def json_error(
    code: str,
    message: str,
    status: int | None = None,
    details: Any = None,
    request_id: str | None = None,
) -> None:
    """A failure under ``--json``, on stderr, in the one documented shape (every key present:
    ``status`` and ``request_id`` are null when no server answered)."""
    error = {
        "code": code,
        "status": status,
        "message": message,
        "details": details,
        "request_id": request_id,
    }
    sys.stderr.write(json.dumps({"error": error}) + "\n")


def open_client(url: str | None, api_key: str | None, database_url: str | None) -> Cairn:
    """A client of the server at ``url``, or of the app in this process."""
    from cairn.client import Cairn

    if url:
        return Cairn(url, api_key=api_key or "")
    try:
        with quiet_ladder_files():
            return Cairn.local(settings_with(database_url=database_url), api_key=api_key)
    except CairnError as exc:  # e.g. ConfigError: an invalid ladder or template file
        raise fail(exc) from exc
    except Exception as exc:  # the database could not be opened
        raise fail(exc) from exc


@contextmanager
def quiet_ladder_files() -> Iterator[None]:
    """The app in this process loads the ladder files too; their warnings belong to ``cairn
    serve`` and ``cairn ladders list``, not to every data command (each repeated them all)."""
    ladders_log = logging.getLogger("cairn.ladders")
    level = ladders_log.level
    ladders_log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        ladders_log.setLevel(level)


@contextmanager
def connected(
    url: str | None, api_key: str | None, database_url: str | None, as_json: bool = False
) -> Iterator[Cairn]:
    """Open a client, turn SDK errors into a printed message and exit 1, always close."""
    from cairn.client import CairnClientError

    client = open_client(url, api_key, database_url)
    try:
        yield client
    except CairnClientError as exc:
        raise report_error(exc, as_json) from exc
    except ValueError as exc:  # client-side validation of a request model
        if as_json:
            json_error("validation_error", str(exc))
        else:
            err_console.print(f"[bold red]invalid input:[/] {esc(exc)}", highlight=False)
        raise typer.Exit(EXIT_FAILED) from exc
    finally:
        client.close()


def dump(model: Any) -> Any:
    """JSON-ready data of a response model (or list of them)."""
    if isinstance(model, list):
        return [dump(m) for m in model]
    if hasattr(model, "model_dump"):
        return model.model_dump(mode="json")
    return model
