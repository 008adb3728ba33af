"""``cairn ladders``: list the ladders, validate a ladder file, run a ladder from the shell."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from cairn.cli._common import (
    EXIT_CONFIG,
    EXIT_FAILED,
    TENANT_HELP,
    acting_tenant,
    console,
    err_console,
    fail,
    print_json,
    settings_with,
    write_text,
)

app = typer.Typer(
    help="Declarative agent pipelines served as OpenAI-compatible models.", no_args_is_help=True
)

DIR_OPTION = typer.Option(None, "--ladders-dir", help="Ladder directory (CAIRN_LADDERS_DIR).")


@app.command("list")
def list_ladders(
    ladders_dir: Path | None = DIR_OPTION,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """List the ladders (model ids) of the ladder directory.

    Example: cairn ladders list --ladders-dir examples/ladders
    """
    from cairn.ladders.registry import LadderRegistry

    settings = settings_with(ladders_dir=ladders_dir)
    try:
        registry = LadderRegistry.load(settings)
    except Exception as exc:
        raise fail(exc) from exc
    rows: list[dict[str, Any]] = [
        {
            "name": ld.name,
            "file": str(ld.path),
            "agent": ld.agent,
            "steps": [s.id for s in ld.steps],
            "slates": [s.title for s in ld.spec.slates],
        }
        for ld in registry.all()
    ]
    if as_json:
        print_json(rows)
    else:
        if settings.ladders_dir is None:
            err_console.print(
                "[yellow]no ladder directory: set CAIRN_LADDERS_DIR or --ladders-dir[/]"
            )
        table = Table("model id", "steps", "slates", "file")
        for r in rows:
            table.add_row(r["name"], ", ".join(r["steps"]), ", ".join(r["slates"]), r["file"])
        console.print(table)
    for problem in registry.errors():  # on stderr, with --json too
        err_console.print(
            f"[bold red]invalid[/] {escape(problem['file'])}: {escape(str(problem['error']))}",
            highlight=False,
        )


@app.command("reload")
def reload_ladders(
    url: str = typer.Option(
        ..., "--url", envvar="CAIRN_URL", help="The running server (CAIRN_URL)."
    ),
    api_key: str | None = typer.Option(
        None, "--api-key", envvar="CAIRN_API_KEY", help="API key (CAIRN_API_KEY)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Make a running server re-read its ladders directory now.

    It also does so by itself within a second of a change. Exit code 3 when a ladder file
    is invalid.

    Example: cairn ladders reload --url http://127.0.0.1:8100
    """
    import httpx

    headers = {"X-API-Key": api_key} if api_key else {}
    try:
        r = httpx.post(url.rstrip("/") + "/v1/ladders/reload", headers=headers, timeout=30)
    except httpx.HTTPError as exc:
        raise fail(exc) from exc
    if r.status_code != 200:
        try:
            err = r.json()["error"]
            message = f"({r.status_code} {err['code']}): {err['message']}"
        except (ValueError, KeyError, TypeError):
            message = f"HTTP {r.status_code}"
        err_console.print(f"[bold red]error[/] {escape(message)}", highlight=False)
        raise typer.Exit(EXIT_FAILED)
    body = r.json()
    if as_json:
        print_json(body)
    else:
        for state in body["ladders"]:
            mark = {"ok": "[green]ok[/]", "stale": "[yellow]stale[/]"}.get(
                state["status"], "[bold red]invalid[/]"
            )
            line = f"{mark} {escape(state['file'])}: {escape(', '.join(state['models']) or '-')}"
            if state["error"]:
                line += f" — {escape(state['error'])}"
            console.print(line, highlight=False)
    if body["errors"]:
        raise typer.Exit(EXIT_CONFIG)


@app.command("validate")
def validate(
    file: Path = typer.Argument(
        ..., help="A ladder YAML file.", exists=True, dir_okay=False, readable=True
    ),
) -> None:
    """Check a ladder file without starting a server.

    Errors name the file and the path inside it (exit code 3; a file that cannot be read is
    bad usage, exit code 2).

    Example: cairn ladders validate examples/ladders/memory-ladder.yaml
    """
    from cairn.ladders.registry import check_templates, compile_ladder
    from cairn.templates import load_catalogue

    settings = settings_with()
    try:
        ladders = compile_ladder(file, settings)
        # As the server checks it: a recordTemplate against the templates it would serve.
        catalogue = load_catalogue(settings.resolved_template_dirs())
        for ladder in ladders:
            check_templates(file, ladder, catalogue)
    except Exception as exc:
        raise fail(exc) from exc
    first = ladders[0]
    console.print(
        f"[green]ok[/] {file}: ladder [bold]{first.name}[/] — "
        f"{len(first.spec.slates)} slate(s), steps: {', '.join(s.id for s in first.steps)}"
        + (f", agents: {', '.join(first.spec.agents)}" if first.spec.agents else ""),
        highlight=False,
    )


@app.command("run")
def run(
    ladder: str = typer.Argument(..., help="The ladder (model id) to run."),
    message: str = typer.Argument(..., help="The user message."),
    ladders_dir: Path | None = DIR_OPTION,
    database_url: str | None = typer.Option(None, "--database-url", help="CAIRN_DATABASE_URL."),
    tenant: str | None = typer.Option(None, "--tenant", help=TENANT_HELP),
    api_key: str | None = typer.Option(
        None, "--api-key", envvar="CAIRN_API_KEY", help="API key (CAIRN_API_KEY): the tenant."
    ),
    model: str | None = typer.Option(None, "--model", help="Model name for steps without one."),
    idempotency_key: str | None = typer.Option(None, "--idempotency-key", help="The run id."),
    user: str = typer.Option("", "--user", help="The request's user."),
    conversation: str = typer.Option("", "--conversation", help="Conversation (context) id."),
    stream: bool = typer.Option(False, "--stream", help="Print the reply as it streams."),
    as_json: bool = typer.Option(False, "--json", help="Print the chat.completion JSON."),
    trace: bool = typer.Option(False, "--trace", help="Print the run's trace (JSON) as well."),
) -> None:
    """Run a ladder in process (same runtime, slates and memory as the server).

    Example: cairn ladders run memory-ladder "What is the capital of France?"
    """
    from cairn.ladders.runtime import RunOutcome, RunRequest
    from cairn.services import Services

    settings = settings_with(ladders_dir=ladders_dir, database_url=database_url)
    try:
        services = Services.from_settings(settings, register_key=False)
    except Exception as exc:
        raise fail(exc) from exc
    try:
        tenant = acting_tenant(
            services.store,
            tenant=tenant,
            api_key=api_key,
            database_url=database_url,
            configured_key=settings.api_key,
        )
        target = services.ladders.get(ladder)
        request = RunRequest(
            tenant=tenant,
            ladder=target.name,
            messages=[{"role": "user", "content": message}],
            model=model,
            run_id=idempotency_key,
            user=user,
            context_id=conversation,
        )
        runtime = services.ladder_runtime
        outcome: RunOutcome | None = None
        for item in runtime.run_stream(target, request, stream=stream and not as_json):
            if isinstance(item, RunOutcome):
                outcome = item
            else:
                write_text(item)
        assert outcome is not None
        if as_json:
            print_json(outcome.completion())
        elif not stream:
            write_text(outcome.content)
        if not as_json:
            sys.stdout.write("\n")
        if trace:
            record = runtime.runs.get(tenant, outcome.run_id)
            print_json(record.trace if record else None)
        err_console.print(
            f"[dim]run {outcome.run_id}" + (" (replayed)" if outcome.replayed else "") + "[/]"
        )
    except Exception as exc:
        raise fail(exc) from exc
    finally:
        services.close()
