"""``cairn bench locomo`` and ``cairn bench recall``: evidence recall through a real server.

Both run ``cairn.bench.recall`` (HTTP, ``POST /v1/context``, text of the evidence in the
assembled context); ``locomo --through search|context`` keeps the older in-process measurements.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from cairn.cli._common import err_console, fail

LOCOMO_DEFAULT = Path("..") / "shared" / "data" / "locomo" / "locomo-dev.json"


def _repo_root() -> Path:
    return Path(__file__).resolve().parents[3]


def default_locomo_path() -> Path | None:
    """``../shared/data/locomo/locomo-dev.json`` beside the checkout, if it is there."""
    path = (_repo_root() / LOCOMO_DEFAULT).resolve()
    return path if path.is_file() else None


def _budgets(value: str) -> tuple[int, ...]:
    try:
        budgets = tuple(int(v) for v in value.replace(" ", "").split(",") if v)
    except ValueError as exc:
        raise typer.BadParameter(f"--budgets takes integers like 250,1000 (got {value!r})") from exc
    if not budgets or min(budgets) <= 0:
        raise typer.BadParameter("--budgets needs at least one positive token count")
    return tuple(sorted(set(budgets)))


def _backends(value: str) -> tuple[str, ...]:
    choices = {"sqlite": ("sqlite",), "postgres": ("postgres",), "both": ("sqlite", "postgres")}
    if value not in choices:
        raise typer.BadParameter("--backend must be sqlite, postgres or both")
    return choices[value]


def _server_env(pairs: list[str], embedder: str | None) -> dict[str, str]:
    env = {}
    for pair in pairs:
        key, sep, val = pair.partition("=")
        if not sep or not key.startswith("CAIRN_"):
            raise typer.BadParameter(f"--server-env takes CAIRN_NAME=value (got {pair!r})")
        env[key] = val
    if embedder is not None:
        env["CAIRN_EMBEDDER"] = embedder
    return env


BACKEND = typer.Option("both", "--backend", help="sqlite, postgres or both.")
BUDGETS = typer.Option(
    "250,500,1000,2000,4000", "--budgets", help="Token budgets, comma-separated."
)
CONVERSATIONS = typer.Option(0, "--conversations", min=0, help="Only the first N (0: all).")
QUESTIONS = typer.Option(0, "--questions", min=0, help="Only the first N per conversation.")
SERVER_ENV = typer.Option(
    [], "--server-env", help="CAIRN_NAME=value for the server (repeat); default: none."
)
PG_URL = typer.Option(
    "postgresql://postgres@127.0.0.1:5432/postgres",
    "--pg-url",
    help="PostgreSQL server (a scratch database is made on it and dropped).",
)
DETAILS = typer.Option(
    None, "--details", dir_okay=False, help="Write every question's outcome here (JSON lines)."
)
AS_JSON = typer.Option(False, "--json", help="Print one JSON object.")
POOL = typer.Option(
    False, "--pool", help="All conversations in one subject (after --conversations)."
)
SETTLE = typer.Option(
    0.0, "--settle", min=0.0, help="Seconds to wait after compiling before asking (default 0)."
)


def run_http(
    spec: str,
    *,
    backend: str,
    budgets: str,
    conversations: int,
    questions: int,
    server_env: dict[str, str],
    pg_url: str,
    details: Path | None,
    as_json: bool,
    settle_s: float = 0.0,
    pool: bool = False,
) -> None:
    """Run the HTTP harness and print the report; exit 1 if a context was over budget."""
    from cairn.bench.recall import run, split
    from cairn.bench.recall_data import combined, dataset_specs, load_dataset
    from cairn.bench.recall_report import format_report, format_summary

    wanted_budgets, wanted_backends = _budgets(budgets), _backends(backend)
    try:
        datasets = [
            load_dataset(one).limited(conversations or None, questions or None)
            for one in dataset_specs(spec)
        ]
        if pool:
            datasets = [d.pooled() for d in datasets]
        report = run(
            combined(datasets),
            backends=wanted_backends,
            budgets=wanted_budgets,
            pg_url=pg_url,
            server_env=server_env,
            settle_s=settle_s,
            progress=err_console.print,
        )
    except Exception as exc:
        raise fail(exc) from exc
    if details is not None:
        with details.open("w", encoding="utf-8") as out:
            for name, r in report.backends.items():
                for o in r.outcomes:
                    out.write(json.dumps({"backend": name, **o.to_json()}, ensure_ascii=False))
                    out.write("\n")
    if len(datasets) == 1:
        text = format_report(report)
        data = report.to_json()
    else:
        parts = split(report, datasets)
        text = format_summary(parts)
        data = {"datasets": {p.dataset: p.to_json() for p in parts}, **report.to_json()}
    sys.stdout.write((json.dumps(data) if as_json else text) + "\n")
    if report.over_budget_total():
        raise typer.Exit(1)


def recall_command(
    dataset: str = typer.Option(
        ...,
        "--dataset",
        help="A cairn-recall/1 (or LoCoMo) JSON file or a built-in name; several, "
        "comma-separated or with * (multilingual3-*), are loaded into one server and "
        "reported per dataset.",
    ),
    backend: str = BACKEND,
    budgets: str = BUDGETS,
    conversations: int = CONVERSATIONS,
    questions: int = QUESTIONS,
    embedder: str | None = typer.Option(
        None, "--embedder", help="Sets CAIRN_EMBEDDER for the server (default: its default)."
    ),
    server_env: list[str] = SERVER_ENV,
    pg_url: str = PG_URL,
    details: Path | None = DETAILS,
    settle: float = SETTLE,
    pool: bool = POOL,
    as_json: bool = AS_JSON,
) -> None:
    """Evidence recall of POST /v1/context through a real server, on any recall dataset.

    Built-in datasets: heldout-en (English), multilingual-<lang> (en, de, es, fr, ru, ar, zh, ja),
    multilingual2-<lang> (en, de, zh, ja, ru, ar; held out),
    multilingual3-<lang> (en, zh, ja, ru, ar, de, ko, es; held out),
    multilingual4-<lang> (en, fr, it, pt, nl, pl, tr; held out),
    multilingual5-<lang> (en, ar, fa, he, hi, th, uk; held out),
    multilingual6-<lang> (en, he, hi, fa, uk, el; held out),
    multilingual7-<lang> (en, el, uk, hi; held out),
    multilingual8-<lang> (en, th, vi, id; held out),
    longform-en, longform2-en (long conversations, about 550 turns each),
    longform-zh, longform-ru (one long conversation each, about 375 turns).
    Example: cairn bench recall --dataset heldout-en --backend sqlite --budgets 500,1000
    Every set at once: cairn bench recall --dataset 'heldout-en,multilingual*' --settle 90
    """
    run_http(
        dataset,
        backend=backend,
        budgets=budgets,
        conversations=conversations,
        questions=questions,
        server_env=_server_env(server_env, embedder),
        pg_url=pg_url,
        details=details,
        as_json=as_json,
        settle_s=settle,
        pool=pool,
    )


def _run_in_process(
    data: Path, through: str, embedder: str | None, limit: int, as_json: bool
) -> None:
    """The older measurements: search or context assembly in process, provenance counted."""
    from cairn.bench.locomo import format_table, run
    from cairn.bench.locomo_context import run as run_through_context
    from cairn.bench.memories import embedder_named

    try:
        emb = embedder_named(embedder or "none")
        progress = None if as_json else err_console.print
        if through == "context":
            report = run_through_context(data, embedder=emb, candidates=limit, progress=progress)
        else:
            report = run(data, embedder=emb, limit=limit, progress=progress)
    except Exception as exc:
        raise fail(exc) from exc
    if as_json:
        sys.stdout.write(json.dumps(report.to_json()) + "\n")
    else:
        sys.stdout.write(format_table(report) + "\n")


def locomo_command(
    data: Path | None = typer.Option(
        None,
        "--data",
        dir_okay=False,
        help="A LoCoMo JSON file (default: ../shared/data/locomo/locomo-dev.json beside the "
        "checkout).",
    ),
    backend: str = BACKEND,
    budgets: str = BUDGETS,
    conversations: int = CONVERSATIONS,
    questions: int = QUESTIONS,
    embedder: str | None = typer.Option(
        None, "--embedder", help="none, local…: CAIRN_EMBEDDER of the server (or in process)."
    ),
    server_env: list[str] = SERVER_ENV,
    pg_url: str = PG_URL,
    details: Path | None = DETAILS,
    settle: float = SETTLE,
    pool: bool = POOL,
    as_json: bool = AS_JSON,
    through: str = typer.Option(
        "http",
        "--through",
        help="http (the headline: POST /v1/context of a real server); search or context: the "
        "older in-process provenance counts.",
    ),
    limit: int = typer.Option(200, "--limit", min=10, help="In process only: candidates."),
) -> None:
    """Evidence recall on LoCoMo (each conversation is one subject), as users get context.

    Example: cairn bench locomo --data ../shared/data/locomo/locomo-dev.json --backend both
    """
    path = data or default_locomo_path()
    if path is None or not path.is_file():
        raise fail(FileNotFoundError("no LoCoMo file: pass --data PATH"))
    if through in ("search", "context"):
        _run_in_process(path, through, embedder, limit, as_json)
        return
    if through != "http":
        raise typer.BadParameter("--through must be http, search or context")
    run_http(
        str(path),
        backend=backend,
        budgets=budgets,
        conversations=conversations,
        questions=questions,
        server_env=_server_env(server_env, embedder),
        pg_url=pg_url,
        details=details,
        as_json=as_json,
        settle_s=settle,
        pool=pool,
    )
