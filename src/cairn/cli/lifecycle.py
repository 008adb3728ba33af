"""``cairn memories``, ``cairn episodes``, ``cairn scopes``, ``cairn export`` / ``import`` and
``cairn retention``: one item at a time, erasure, moving a subject, and expiry."""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import typer

from cairn.cli._client import API_KEY, DATABASE_URL, JSON, URL, connected, dump
from cairn.cli._common import EXIT_FAILED, console, err_console, json_line, print_json
from cairn.core.transfer import EXPORT_FORMAT, EXPORT_VERSION

# The API's limit (``cairn.engine.retention.MAX_TTL_DAYS``; not imported: the CLI starts
# without the engine), so the help shows it and the CLI refuses a longer TTL itself.
TTL_DAYS_MAX = 36_500

memories_app = typer.Typer(help="Read, correct and forget single memories.", no_args_is_help=True)
episodes_app = typer.Typer(help="Read and delete single episodes.", no_args_is_help=True)
scopes_app = typer.Typer(help="Erase a person's scopes.", no_args_is_help=True)
retention_app = typer.Typer(help="Your tenant's retention policy.", no_args_is_help=True)


def _confirm(yes: bool, question: str) -> None:
    if not yes and not typer.confirm(question):
        err_console.print("nothing deleted")
        raise typer.Exit(EXIT_FAILED)


@memories_app.command("get")
def get_memory(
    memory_id: str = typer.Argument(..., help="The memory's id."),
    url: str | None = URL,
    api_key: str | None = API_KEY,
    database_url: str | None = DATABASE_URL,
    as_json: bool = JSON,
) -> None:
    """A memory with the versions it replaced and that replaced it.

    Example: cairn memories get 0191c0de-...
    """
    with connected(url, api_key, database_url, as_json) as client:
        detail = client.memories.get(memory_id)
    if as_json:
        print_json(dump(detail))
        return
    m = detail.memory
    console.print(f"[bold]{m.kind}[/] {m.status}  {m.id}")
    console.print(m.content, markup=False)
    for label, items in (("replaces", detail.replaces), ("replaced by", detail.replaced_by)):
        for item in items:
            console.print(f"{label} {item.id}: {item.content}", style="dim", markup=False)


@memories_app.command("update")
def update_memory(
    memory_id: str = typer.Argument(..., help="The memory's id (the current version)."),
    content: str | None = typer.Option(None, "--content", help="The corrected text."),
    kind: str | None = typer.Option(None, "--kind"),
    confidence: float | None = typer.Option(None, "--confidence", min=0.0, max=1.0),
    editor: str | None = typer.Option(None, "--editor", help="Who corrects (recorded)."),
    note: str | None = typer.Option(None, "--note", help="Why (recorded)."),
    url: str | None = URL,
    api_key: str | None = API_KEY,
    database_url: str | None = DATABASE_URL,
    as_json: bool = JSON,
) -> None:
    """Correct a memory: a new version supersedes it, with provenance.

    Example: cairn memories update 0191c0de-... --content "Ana lives in Lisbon" --editor ana
    """
    with connected(url, api_key, database_url, as_json) as client:
        new = client.memories.update(
            memory_id, content=content, kind=kind, confidence=confidence, editor=editor, note=note
        )
    if as_json:
        print_json(dump(new))
        return
    console.print(f"new version {new.id} supersedes {memory_id}")


@memories_app.command("delete")
def delete_memory(
    memory_id: str = typer.Argument(..., help="The memory's id."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    url: str | None = URL,
    api_key: str | None = API_KEY,
    database_url: str | None = DATABASE_URL,
    as_json: bool = JSON,
) -> None:
    """Forget one memory (a recompile of the same episodes does not bring it back).

    Example: cairn memories delete 0191c0de-... --yes
    """
    _confirm(yes, f"Forget memory {memory_id}?")
    with connected(url, api_key, database_url, as_json) as client:
        result = client.memories.delete(memory_id)
    if as_json:
        print_json(dump(result))
        return
    console.print(f"forgot {result.memory_id}")


@episodes_app.command("get")
def get_episode(
    episode_id: str = typer.Argument(..., help="The episode's id."),
    url: str | None = URL,
    api_key: str | None = API_KEY,
    database_url: str | None = DATABASE_URL,
) -> None:
    """One episode, as JSON.

    Example: cairn episodes get 0191c0de-...
    """
    with connected(url, api_key, database_url, True) as client:
        print_json(dump(client.episodes.get(episode_id)))


@episodes_app.command("delete")
def delete_episode(
    episode_id: str = typer.Argument(..., help="The episode's id."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    url: str | None = URL,
    api_key: str | None = API_KEY,
    database_url: str | None = DATABASE_URL,
    as_json: bool = JSON,
) -> None:
    """Delete an episode and the memories derived from it alone.

    Example: cairn episodes delete 0191c0de-... --yes
    """
    _confirm(yes, f"Delete episode {episode_id} and the memories only it supports?")
    with connected(url, api_key, database_url, as_json) as client:
        result = client.episodes.delete(episode_id)
    if as_json:
        print_json(dump(result))
        return
    console.print(f"deleted {result.episode_id} and {result.memories_deleted} memory(ies)")


@scopes_app.command("delete")
def delete_scopes(
    user_id: str = typer.Option(..., "--user-id", help="The person to erase."),
    runtime_id: str | None = typer.Option(None, "--runtime-id", help="Only this runtime."),
    agent_id: str | None = typer.Option(None, "--agent-id", help="Only this agent."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    url: str | None = URL,
    api_key: str | None = API_KEY,
    database_url: str | None = DATABASE_URL,
    as_json: bool = JSON,
) -> None:
    """Erase everything of a user in every runtime and agent (or only the ones given).

    Example: cairn scopes delete --user-id ana --yes
    """
    _confirm(yes, f"Erase everything of user {user_id!r}?")
    with connected(url, api_key, database_url, as_json) as client:
        result = client.scopes.delete(user_id, runtime_id=runtime_id, agent_id=agent_id)
    if as_json:
        print_json(dump(result))
        return
    rows = sum(result.deleted.values())
    console.print(f"erased {user_id}: {len(result.partitions)} partition(s), {rows} row(s)")


def export(
    subject_id: str = typer.Argument(..., help="The subject to export."),
    output: Path | None = typer.Option(None, "--output", "-o", help="File (default: stdout)."),
    url: str | None = URL,
    api_key: str | None = API_KEY,
    database_url: str | None = DATABASE_URL,
) -> None:
    """Write everything of a subject as JSON lines (restore it with 'cairn import').

    Example: cairn export ana -o ana.jsonl
    """
    out = output.open("w", encoding="utf-8") if output else sys.stdout
    count = 0
    try:
        with connected(url, api_key, database_url) as client:
            for record in client.subjects.export(subject_id):
                out.write(json_line(record) + "\n")
                count += 1
    finally:
        if output:
            out.close()
    err_console.print(f"{max(count - 1, 0)} record(s) exported")


def import_(
    subject_id: str = typer.Argument(..., help="The subject to restore into."),
    source: Path = typer.Argument(..., exists=True, dir_okay=False, help="An export file."),
    url: str | None = URL,
    api_key: str | None = API_KEY,
    database_url: str | None = DATABASE_URL,
    as_json: bool = JSON,
) -> None:
    """Restore a subject from 'cairn export' (ids and provenance kept; repeats are skipped).

    Example: cairn import ana ana.jsonl --url http://fleet:8100
    """
    numbered = _read_records(source)
    with connected(url, api_key, database_url, as_json) as client:
        result = _import_in_batches(client, subject_id, source, numbered)
    if as_json:
        print_json(dump(result))
        return
    made = ", ".join(_count(n, k) for k, n in result.imported.items() if n) or "nothing new"
    reasons = Counter(s.reason for s in result.skipped_records)
    why = ", ".join(f"{n} {reason.replace('_', ' ')}" for reason, n in sorted(reasons.items()))
    console.print(f"imported {made}; skipped {result.skipped}" + (f" ({why})" if why else ""))


def _read_records(source: Path) -> list[tuple[int, dict[str, Any]]]:
    """``(line number, record)`` of an export file's records; its header is checked (a file
    of another format or version is refused) and left out."""
    numbered: list[tuple[int, dict[str, Any]]] = []
    with source.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except (json.JSONDecodeError, RecursionError) as exc:
                err_console.print(f"{source}, line {lineno}: not a JSON record ({exc})")
                raise typer.Exit(EXIT_FAILED) from exc
            if not isinstance(record, dict):
                err_console.print(f"{source}, line {lineno}: a record is a JSON object")
                raise typer.Exit(EXIT_FAILED)
            if record.get("type") == "header":
                if (record.get("format"), record.get("version")) != (EXPORT_FORMAT, EXPORT_VERSION):
                    err_console.print(
                        f"{source}, line {lineno}: not a {EXPORT_FORMAT} version "
                        f"{EXPORT_VERSION} export (format {record.get('format')!r}, version "
                        f"{record.get('version')!r})"
                    )
                    raise typer.Exit(EXIT_FAILED)
                continue
            numbered.append((lineno, record))
    return numbered


_RECORD = re.compile(r"^record (\d+): ")


def _import_in_batches(
    client: Any, subject_id: str, source: Path, numbered: list[tuple[int, dict[str, Any]]]
) -> Any:
    """Import ``numbered`` records a call at a time; a refused record is reported by its line
    in the file, with what was imported before it (each call is one transaction)."""
    from cairn.client import APIError
    from cairn.client._lifecycle import import_batches, merge_imports

    results, places = [], []
    start = 0
    for batch in import_batches(numbered, lambda pair: pair[1]):
        try:
            results.append(client.subjects.import_records(subject_id, [r for _, r in batch]))
            places.append([lineno for lineno, _ in batch])  # skipped records by file line
        except APIError as exc:
            found = _RECORD.match(exc.message)
            if exc.code != "invalid_import" or found is None or int(found[1]) >= len(batch):
                raise
            line = batch[int(found[1])][0]
            before = (
                f"the {start} records before line {batch[0][0]} were imported; " if start else ""
            )
            err_console.print(
                f"{source}, line {line}: {exc.message[found.end() :]} ({exc.code}); "
                f"{before if start else ''}"
                "nothing of that call was. Fix the line and run again: what is stored is skipped."
            )
            raise typer.Exit(EXIT_FAILED) from exc
        start += len(batch)
    return merge_imports(subject_id, results, places)


@retention_app.command("show")
def show_retention(
    url: str | None = URL,
    api_key: str | None = API_KEY,
    database_url: str | None = DATABASE_URL,
) -> None:
    """Your tenant's time-to-live of episodes and memories (null: forever).

    Example: cairn retention show --url http://127.0.0.1:8100
    """
    with connected(url, api_key, database_url, True) as client:
        print_json(client.request("GET", "/v1/retention"))


@retention_app.command("set")
def set_retention(
    episode_ttl_days: int | None = typer.Option(
        None, "--episode-ttl-days", min=1, max=TTL_DAYS_MAX
    ),
    memory_ttl_days: int | None = typer.Option(None, "--memory-ttl-days", min=1, max=TTL_DAYS_MAX),
    url: str | None = URL,
    api_key: str | None = API_KEY,
    database_url: str | None = DATABASE_URL,
) -> None:
    """Set your tenant's retention (an option left out: kept forever); the worker enforces it.

    Example: cairn retention set --episode-ttl-days 30 --memory-ttl-days 365
    """
    body = {"episode_ttl_days": episode_ttl_days, "memory_ttl_days": memory_ttl_days}
    with connected(url, api_key, database_url, True) as client:
        before = client.request("GET", "/v1/retention")
        print_json(client.request("PUT", "/v1/retention", json=body, idempotent=True))
    for key, value in body.items():
        if value is None and before.get(key) is not None:  # a policy left out is cleared
            option = "--" + key.replace("_", "-")
            err_console.print(
                f"note: {key} was {before[key]}, now none (kept forever); give {option} "
                "to keep a time-to-live",
                highlight=False,
            )


# Plurals of the record types an import counts (``episode`` → ``episodes``).
_PLURALS = {"memory": "memories", "slate_eviction": "slate evictions", "slate_skip": "slate skips"}


def _count(n: int, kind: str) -> str:
    """``1 memory``, ``2 memories``, ``3 episodes``."""
    if n == 1:
        return f"1 {kind.replace('_', ' ')}"
    return f"{n} {_PLURALS.get(kind, kind.replace('_', ' ') + 's')}"
