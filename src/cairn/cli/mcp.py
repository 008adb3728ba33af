"""``cairn mcp``: run Cairn's memory tools as an MCP server (stdio or streamable HTTP)."""

from __future__ import annotations

import typer

from cairn.cli._client import API_KEY, DATABASE_URL, URL, report_error
from cairn.cli._common import err_console, fail, settings_with
from cairn.errors import CairnError


def mcp(
    transport: str = typer.Option(
        "stdio", "--transport", "-t", help="stdio (for a client that starts this command) or http."
    ),
    host: str = typer.Option("127.0.0.1", "--host", help="http: bind address (loopback)."),
    port: int = typer.Option(8765, "--port", min=0, max=65535, help="http: port."),
    path: str = typer.Option("/mcp", "--path", help="http: endpoint path."),
    allow_remote: bool = typer.Option(
        False,
        "--allow-remote",
        help="http: allow a non-loopback --host. The MCP endpoint has no authentication of its "
        "own and acts with this process's API key: put it behind one.",
    ),
    url: str | None = URL,
    api_key: str | None = API_KEY,
    database_url: str | None = DATABASE_URL,
) -> None:
    """Serve the memory tools over MCP, bound to one API key (one tenant).

    Tools: record_episode, apply_template, list_templates, compile_memories, search_memories,
    get_context, get_timeline, list_subjects, list_slates, read_slate, write_slate, and the
    destructive correct_memory, forget_memory and delete_subject.
    Without --url the API runs in this process on the configured database.

    Example (an MCP client's config): {"command": "cairn", "args": ["mcp"]}

    Example: cairn mcp --transport http --port 8765 --url http://127.0.0.1:8100
    """
    import anyio

    from cairn.cli.main import is_loopback
    from cairn.client import AsyncCairn, CairnClientError
    from cairn.mcp import build_server

    if transport not in ("stdio", "http"):
        raise typer.BadParameter("choose stdio or http", param_hint="--transport")
    if transport == "http" and not is_loopback(host) and not allow_remote:
        raise typer.BadParameter(
            f"{host} is not a loopback address; add --allow-remote if a proxy authenticates "
            "callers",
            param_hint="--host",
        )
    try:
        client = (
            AsyncCairn(url, api_key=api_key or "")
            if url
            else AsyncCairn.local(settings_with(database_url=database_url), api_key=api_key)
        )
    except CairnError as exc:
        raise fail(exc) from exc
    except Exception as exc:  # the database could not be opened: one line, as every command
        raise fail(exc) from exc
    server = build_server(client)

    async def run() -> None:
        async with client:
            # Fail now, not on every tool call, if the API is unreachable or the key is wrong.
            await client.subjects.list(limit=1)
            if transport == "stdio":
                await server.run_stdio_async()
            else:
                err_console.print(f"Cairn MCP on http://{host}:{port}{path}")
                await server.run_streamable_http_async(
                    host=host, port=port, streamable_http_path=path
                )

    try:
        anyio.run(run)
    except CairnClientError as exc:
        raise report_error(exc, False) from exc
    except KeyboardInterrupt:
        pass
