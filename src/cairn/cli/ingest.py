"""``cairn ingest``: record episodes from a file (JSONL, LoCoMo, chat export) in batches."""

from __future__ import annotations

import codecs
import math
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from pydantic import ValidationError
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from cairn.cli._client import (
    API_KEY,
    DATABASE_URL,
    JSON,
    URL,
    client_error,
    connected,
    report_error,
)
from cairn.cli._common import EXIT_FAILED, console, err_console, esc, print_json
from cairn.cli._importers import read
from cairn.core.text import (
    LONE_SURROGATE_MESSAGE,
    MAX_JSON_DEPTH,
    NUL_MESSAGE,
    lone_surrogate_path,
    nul_path,
)

if TYPE_CHECKING:
    from cairn.client import Cairn, EpisodeCreate

MAX_SHOWN_ERRORS = 20


def _validate(items: Any) -> tuple[list[EpisodeCreate], list[dict[str, str]]]:
    from cairn.client import EpisodeCreate

    episodes: list[EpisodeCreate] = []
    errors: list[dict[str, str]] = []
    for where, data in items:
        if isinstance(data, Exception):
            errors.append({"where": _shown(where), "error": _shown(str(data))})
            continue
        problem = _unstorable_text(data)
        if problem is not None:
            errors.append({"where": _shown(where), "error": problem})
            continue
        try:
            episodes.append(EpisodeCreate.model_validate(data))
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"]) or "(episode)"
            message = str(first["msg"]).removeprefix("Value error, ")  # (pydantic's prefix)
            errors.append({"where": _shown(where), "error": _shown(f"{field}: {message}")})
    return episodes, errors


def _unstorable_text(data: Any) -> str | None:
    """What the server would refuse in a record's strings (keys included), checked by the
    server's own rules — a lone surrogate, then a NUL character — so the record is reported
    here with its line rather than failing its whole batch; None if nothing."""
    for find, message in (
        (lone_surrogate_path, LONE_SURROGATE_MESSAGE),
        (nul_path, NUL_MESSAGE),
    ):
        path = find(data)
        if path is not None:
            return f"{_shown(path) or '(episode)'}: {message}"
    return _json_problem(data)


def _json_problem(value: Any, path: str = "", depth: int = 1) -> str | None:
    """What the server refuses of a record's JSON besides its text: NaN and infinities (no
    JSON number), and nesting deeper than a batch may carry (the batch's own two levels
    count: ``MAX_JSON_DEPTH``)."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"{_shown(path) or '(episode)'}: {value} is not a JSON number"
    if isinstance(value, dict | list):
        if depth > MAX_JSON_DEPTH - 2:
            return f"{_shown(path) or '(episode)'}: nested more than {MAX_JSON_DEPTH} levels"
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            found = _json_problem(item, f"{path}.{key}" if path else str(key), depth + 1)
            if found is not None:
                return found
    return None


def _shown(text: str) -> str:
    """``text`` with characters a terminal cannot show (NUL, a lone surrogate, controls) as
    escapes: a field path or message may quote them, and a lone surrogate cannot be printed."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


@contextmanager
def _input(file: str) -> Iterator[Path]:
    """The file to read; standard input is first copied to a temporary file."""
    if file != "-":
        path = Path(file)
        if not path.is_file():
            raise typer.BadParameter(f"{file} is not a readable file", param_hint="FILE")
        raw = path.read_bytes()
        if not raw.startswith(codecs.BOM_UTF8):
            _utf8(raw, file)
            yield path
            return
    else:
        raw = sys.stdin.buffer.read()
    # Standard input, or a file that starts with a byte-order mark (as Windows tools write
    # UTF-8): read from a copy without it.
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / ("stdin" if file == "-" else Path(file).name)
        path.write_text(_utf8(raw, file).removeprefix("\ufeff"), encoding="utf-8")
        yield path


def _utf8(raw: bytes, file: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        where = "standard input" if file == "-" else file
        raise typer.BadParameter(
            f"{where} is not UTF-8 text (byte {exc.start}: {raw[exc.start : exc.start + 1]!r})",
            param_hint="FILE",
        ) from None


def _compile(client: Cairn, subjects: list[str]) -> dict[str, int]:
    created: dict[str, int] = {}
    for subject in subjects:
        total = 0
        while True:
            result = client.memories.compile(subject)
            total += result.memories_created
            if not result.has_more:
                break
        created[subject] = total
    return created


def ingest(
    file: str = typer.Argument(..., help="The file to import; '-' reads standard input."),
    fmt: str = typer.Option(
        "auto", "--format", "-f", help="jsonl | locomo | chat | auto (guess from the content)."
    ),
    subject: str | None = typer.Option(
        None, "--subject", help="Subject for records that name none."
    ),
    batch_size: int = typer.Option(
        100, "--batch-size", min=1, max=100, help="Episodes per request (all-or-nothing each)."
    ),
    skip_invalid: bool = typer.Option(
        False, "--skip-invalid", help="Import the valid records even if some are not."
    ),
    keys: bool = typer.Option(
        True,
        "--keys/--no-keys",
        help="JSONL: give each line without an idempotency_key one from "
        "its content, so importing the same records again writes nothing.",
    ),
    compile_after: bool = typer.Option(
        False, "--compile", help="Compile the imported subjects afterwards."
    ),
    url: str | None = URL,
    api_key: str | None = API_KEY,
    database_url: str | None = DATABASE_URL,
    as_json: bool = JSON,
) -> None:
    """Import episodes from a file, with a progress bar and a summary.

    Every record is validated before anything is sent; by default one invalid record stops
    the import with nothing written (exit 1). Example:

        cairn ingest episodes.jsonl --compile

        cairn ingest locomo10.json --format locomo --url http://127.0.0.1:8100

        cat events.jsonl | cairn ingest - --subject user-1
    """
    if fmt not in ("auto", "jsonl", "locomo", "chat"):
        raise typer.BadParameter("choose jsonl, locomo, chat or auto", param_hint="--format")
    started = time.perf_counter()
    with _input(file) as path:
        key_prefix = "ingest" if keys else None
        resolved, items = read(path, fmt, subject, key_prefix)  # type: ignore[arg-type]
        episodes, errors = _validate(items)
    summary: dict[str, Any] = {
        "file": file,
        "format": resolved,
        "records": len(episodes) + len(errors),
        "valid": len(episodes),
        "invalid": len(errors),
        "sent": 0,
        "created": 0,
        "duplicates": 0,
        "subjects": len({e.subject_id for e in episodes}),
        "batches": 0,
        "errors": errors[:MAX_SHOWN_ERRORS],
    }
    if errors and not skip_invalid:
        _print_errors(errors, as_json, summary)
        raise typer.Exit(EXIT_FAILED)
    with connected(url, api_key, database_url, as_json) as client:
        try:
            _send(client, episodes, batch_size, summary, as_json)
        except client_error() as exc:  # (the SDK is imported only when one is raised)
            summary["seconds"] = round(time.perf_counter() - started, 3)
            if not as_json:
                err_console.print(
                    f"[red]stopped after {summary['sent']} episode(s) in "
                    f"{summary['batches']} batch(es)[/]"
                )
            raise report_error(exc, as_json) from exc
        if compile_after and episodes:
            summary["compiled"] = _compile(client, sorted({e.subject_id for e in episodes}))
    summary["seconds"] = round(time.perf_counter() - started, 3)
    if as_json:
        print_json(summary)
        return
    _print_summary(summary)


def _send(
    client: Cairn,
    episodes: list[EpisodeCreate],
    batch_size: int,
    summary: dict[str, Any],
    quiet: bool,
) -> None:
    with Progress(
        TextColumn("ingest"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        disable=quiet,
        transient=True,
    ) as progress:
        task = progress.add_task("ingest", total=len(episodes))
        for start in range(0, len(episodes), batch_size):
            chunk = episodes[start : start + batch_size]
            result = client.episodes.create_many(chunk)
            summary["batches"] += 1
            summary["sent"] += len(chunk)
            summary["created"] += result.episodes_created
            summary["duplicates"] += len(chunk) - result.episodes_created
            progress.advance(task, len(chunk))


def _print_errors(errors: list[dict[str, str]], as_json: bool, summary: dict[str, Any]) -> None:
    if as_json:
        print_json(summary)
        return
    for e in errors[:MAX_SHOWN_ERRORS]:
        err_console.print(f"[red]{esc(e['where'])}[/]: {esc(e['error'])}", highlight=False)
    if len(errors) > MAX_SHOWN_ERRORS:
        err_console.print(f"... and {len(errors) - MAX_SHOWN_ERRORS} more")
    err_console.print(
        f"[bold red]{len(errors)} invalid record(s); nothing was imported[/] "
        "(--skip-invalid imports the rest)"
    )


def _print_summary(summary: dict[str, Any]) -> None:
    table = Table(show_header=False, title="ingest summary", title_justify="left")
    for key in (
        "file",
        "format",
        "records",
        "invalid",
        "sent",
        "created",
        "duplicates",
        "subjects",
        "batches",
        "seconds",
    ):
        table.add_row(key, str(summary[key]))
    if "compiled" in summary:
        table.add_row("memories compiled", str(sum(summary["compiled"].values())))
    console.print(table)
    for e in summary["errors"]:
        err_console.print(
            f"[yellow]skipped {esc(e['where'])}[/]: {esc(e['error'])}", highlight=False
        )
