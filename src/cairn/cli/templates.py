"""``cairn templates``: list, show, apply and validate memory templates."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from pydantic import ValidationError
from rich.table import Table

from cairn.cli._client import quiet_ladder_files
from cairn.cli._common import (
    TENANT_HELP,
    acting_tenant,
    console,
    esc,
    fail,
    print_json,
    settings_with,
    whole_column,
)
from cairn.core.scope import Scope
from cairn.core.text import LONE_SURROGATE_MESSAGE, lone_surrogate_path
from cairn.errors import InvalidInput
from cairn.templates import MemoryTemplate, TemplateCatalogue, load_catalogue, load_template_file
from cairn.templates.loader import template_files

if TYPE_CHECKING:
    from cairn.api.routes.templates import TemplateApply

app = typer.Typer(
    help="Memory templates: YAML scaffolds that turn values into one episode.",
    no_args_is_help=True,
)

JSON_OPTION = typer.Option(False, "--json", help="Print JSON.")


def _catalogue() -> TemplateCatalogue:
    """The catalogue a server with the current settings would serve (exit 3 if invalid)."""
    try:
        return load_catalogue(settings_with().resolved_template_dirs())
    except Exception as exc:
        raise fail(exc) from exc


def _template(catalogue: TemplateCatalogue, template_id: str) -> MemoryTemplate:
    try:
        return catalogue.get(template_id)
    except Exception as exc:
        raise fail(exc) from exc


def _parse_sets(pairs: list[str]) -> dict[str, str]:
    values: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise typer.BadParameter(f"expected field=value, got {pair!r}", param_hint="--set")
        if name in values:
            raise typer.BadParameter(f"field {name!r} is set twice", param_hint="--set")
        values[name] = value
    return values


@app.command("list")
def list_templates(as_json: bool = JSON_OPTION) -> None:
    """List the bundled templates and those in CAIRN_TEMPLATE_DIRS.

    Example: cairn templates list
    """
    catalogue = _catalogue()
    if as_json:
        print_json([t.public() for t in catalogue.templates()])
        return
    table = Table()
    widest = max((len(t.id) for t in catalogue.templates()), default=2)
    whole_column(table, "id", width=min(36, widest))
    for header in ("version", "episode type", "fields (* required)", "title"):
        table.add_column(header)
    for t in catalogue.templates():
        fields = ", ".join(f.name + ("*" if f.required else "") for f in t.fields)
        table.add_row(t.id, str(t.version), t.episode_type, fields, t.title)
    console.print(table)


@app.command("show")
def show(
    template_id: str = typer.Argument(..., help="The template's id."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Show one template: its fields and its content scaffold.

    Example: cairn templates show customer-support-handoff
    """
    catalogue = _catalogue()
    t = _template(catalogue, template_id)
    if as_json:
        print_json(t.public())
        return
    console.print(
        f"[bold]{esc(t.title)}[/]  {t.id} v{t.version} → episode type {esc(t.episode_type)}"
    )
    console.print(f"[dim]from {esc(catalogue.source_of(t.id))}[/]", highlight=False)
    if t.description:
        console.print(t.description, highlight=False)
    table = Table("field", "type", "required", "description")
    for f in t.fields:
        table.add_row(f.name, f.type, "yes" if f.required else "", f.description or "")
    console.print(table)
    console.print("[bold]content_template:[/]")
    console.print(t.content_template, markup=False, highlight=False)


@app.command("apply")
def apply(
    template_id: str = typer.Argument(..., help="The template's id."),
    subject: str = typer.Option(..., "--subject", help="Subject id the episode belongs to."),
    sets: list[str] = typer.Option([], "--set", help="A value: field=value (repeatable)."),
    session: str | None = typer.Option(None, "--session", help="Session (conversation) id."),
    idempotency_key: str | None = typer.Option(
        None, "--idempotency-key", help="Repeat-safe key; a repeat returns the original."
    ),
    occurred_at: datetime | None = typer.Option(
        None, "--occurred-at", help="When it happened (ISO 8601; default now)."
    ),
    tenant: str | None = typer.Option(None, "--tenant", help=TENANT_HELP),
    api_key: str | None = typer.Option(
        None, "--api-key", envvar="CAIRN_API_KEY", help="API key (CAIRN_API_KEY): the tenant."
    ),
    database_url: str | None = typer.Option(None, "--database-url", help="CAIRN_DATABASE_URL."),
) -> None:
    """Apply a template to a subject and print the created episode as JSON.

    Example: cairn templates apply customer-support-handoff --subject customer:globex
    --set customer="Globex Corp" --set issue="Duplicate charge on the May invoice"
    """
    from cairn.api.schemas import EpisodePublic
    from cairn.engine.ingest import record_episode
    from cairn.services import Services
    from cairn.templates import apply_template

    body = _request(
        {
            "subject_id": subject,
            "session_id": session,
            "values": _parse_sets(sets),
            "idempotency_key": idempotency_key,
            "occurred_at": occurred_at,
        }
    )
    settings = settings_with(database_url=database_url)
    try:
        with quiet_ladder_files():
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
        template = services.templates.get(template_id)
        services.store.keys.ensure_tenant(tenant)
        item = apply_template(
            template,
            Scope.for_subject(body.subject_id),
            body.values,
            session_id=body.session_id,
            idempotency_key=body.idempotency_key,
            occurred_at=body.occurred_at,
        )
        episode, _ = record_episode(services.store, tenant, item, services.ingest_listeners)
    except Exception as exc:
        raise fail(exc) from exc
    finally:
        services.close()
    print_json(EpisodePublic.of(episode).model_dump(mode="json"))


# The options of ``apply`` by the request field they fill, to name them in an error.
_APPLY_OPTIONS = {
    "subject_id": "--subject",
    "session_id": "--session",
    "values": "--set",
    "idempotency_key": "--idempotency-key",
    "occurred_at": "--occurred-at",
}


def _option(field: str) -> str:
    """A request field path as the option that fills it (``values.issue`` → ``--set issue``)."""
    head, _, rest = field.partition(".")
    return _APPLY_OPTIONS.get(head, head) + (f" {rest}" if rest else "")


def _request(data: dict[str, Any]) -> TemplateApply:
    """The apply request, checked as the HTTP API checks it (the same model, and the body
    check before it), so an invalid option is the API's error code and exit 1."""
    from cairn.api.routes.templates import TemplateApply
    from cairn.core.validation import validation_details

    # Bytes that are not UTF-8 in an argument arrive as lone surrogates, which the API refuses.
    where = lone_surrogate_path(data)
    if where is not None:
        error = InvalidInput(f"{_option(where)}: {LONE_SURROGATE_MESSAGE}", code="invalid_text")
        raise fail(error)
    try:
        return TemplateApply.model_validate(data)
    except ValidationError as exc:
        details = validation_details([dict(e) for e in exc.errors(include_url=False)])
    for d in details:
        d["field"] = _option(d["field"])
    message = "; ".join(f"{d['field']}: {d['message']}" for d in details)
    raise fail(InvalidInput(message, details=details))


@app.command("validate")
def validate(
    paths: list[Path] = typer.Argument(..., help="Template directories or single files."),
) -> None:
    """Check template files with the rules the server applies at start.

    They are checked together with the bundled set (so a re-used bundled id is reported).
    Exit 3 on the first problem.

    Example: cairn templates validate ./templates
    """
    try:
        catalogue = load_catalogue()
        bundled = len(catalogue)
        for path in paths:
            if path.is_file():
                catalogue.add(path, load_template_file(path))
            else:
                for file in template_files(path):
                    catalogue.add(file, load_template_file(file))
    except Exception as exc:
        raise fail(exc) from exc
    console.print(f"ok: {len(catalogue) - bundled} template(s) valid ({bundled} bundled)")
