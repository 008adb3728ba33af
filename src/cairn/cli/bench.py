"""``cairn bench``: the benchmarks, one command each (results go in docs/benchmarks.md).

Each feature registers its command below with one ``app.command`` line pointing at its module in
``cairn.bench``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import typer

app = typer.Typer(help="Run benchmarks that print tables.", no_args_is_help=True)


def _progress(line: str) -> None:
    """A benchmark's progress line, dim on stderr."""
    from cairn.cli._common import err_console

    err_console.print(line, style="dim", markup=False)


@contextmanager
def _harness() -> Iterator[None]:
    """Run a benchmark harness: a ``HarnessError`` (a run that cannot measure what it claims)
    is printed as FAIL and exits 1."""
    from cairn.bench.recall import HarnessError
    from cairn.cli._common import err_console

    try:
        yield
    except HarnessError as exc:
        err_console.print(f"FAIL: {exc}", markup=False)
        raise typer.Exit(1) from exc


@app.command("ingest")
def ingest(
    episodes: int = typer.Option(10_000, help="Episodes per mode."),
    concurrency: int = typer.Option(8, help="Requests in flight."),
    backend: list[str] = typer.Option(["sqlite", "postgres"], help="Backends to measure."),
    pg_url: str = typer.Option(
        "postgresql://postgres@127.0.0.1:5432/postgres",
        help="PostgreSQL server (a scratch database is made on it).",
    ),
    servers: int = typer.Option(
        1, min=1, help="Server processes the batches are spread over (one database)."
    ),
) -> None:
    """Episodes/s and latency of POST /v1/episodes through a real server on loopback.

    Example: cairn bench ingest --episodes 10000 --backend postgres --servers 2
    """
    from cairn.bench.ingest import run

    run(
        episodes=episodes,
        concurrency=concurrency,
        backends=tuple(backend),
        pg_url=pg_url,
        servers=servers,
    )


@app.command("templates")
def templates(
    applies: int = typer.Option(5_000, help="Applies (and plain episodes) per backend."),
    concurrency: int = typer.Option(8, help="Requests in flight."),
    backend: list[str] = typer.Option(["sqlite", "postgres"], help="Backends to measure."),
    pg_url: str = typer.Option(
        "postgresql://postgres@127.0.0.1:5432/postgres",
        help="PostgreSQL server (a scratch database is made on it).",
    ),
) -> None:
    """Template catalogue load, rendering, and apply vs plain POST /v1/episodes over HTTP.

    Example: cairn bench templates --applies 5000 --backend sqlite
    """
    from cairn.bench.templates import run

    run(applies=applies, concurrency=concurrency, backends=tuple(backend), pg_url=pg_url)


@app.command("ladders")
def ladders(
    calls: int = typer.Option(1000, help="Measured calls (after the warm-up)."),
    warmup: int = typer.Option(50, help="Calls not measured."),
    backend: list[str] = typer.Option(["sqlite"], help="Backends: sqlite, postgres."),
    pg_url: str = typer.Option(
        "postgresql://postgres@127.0.0.1:5432/postgres",
        help="PostgreSQL server (a scratch database is made on it).",
    ),
    http: bool = typer.Option(True, help="Also measure end to end over loopback HTTP."),
) -> None:
    """Ladder runtime overhead per call (scripted model, one slate read and one write).

    Example: cairn bench ladders --calls 1000 --backend sqlite --backend postgres
    """
    from cairn.bench.ladders import run

    run(calls=calls, warmup=warmup, backends=tuple(backend), pg_url=pg_url, http=http)


@app.command("slates")
def slates(
    ops: int = typer.Option(2000, help="Operations per measurement."),
    threads: int = typer.Option(4, help="Threads appending to one folder at once."),
    backend: list[str] = typer.Option(["sqlite", "postgres"], help="Backends to measure."),
    pg_url: str = typer.Option(
        "postgresql://postgres@127.0.0.1:5432/postgres",
        help="PostgreSQL server (a scratch database is made on it).",
    ),
) -> None:
    """Slate writes/s and reads/s with eviction active, p50/p95 latency.

    Example: cairn bench slates --ops 2000 --backend sqlite --backend postgres
    """
    from cairn.bench.slates import run

    run(ops=ops, threads=threads, backends=tuple(backend), pg_url=pg_url)


from cairn.cli.memories_bench import memories_command  # noqa: E402
from cairn.cli.recall_bench import locomo_command, recall_command  # noqa: E402

app.command("locomo")(locomo_command)
app.command("recall")(recall_command)
app.command("memories")(memories_command)


@app.command("context")
def context(
    sizes: list[int] = typer.Option(
        [1_000, 10_000, 100_000], "--size", help="Memories in the subject (repeat the option)."
    ),
    backend: list[str] = typer.Option(["sqlite", "postgres"], help="Backends to measure."),
    requests: int = typer.Option(300, help="Sequential requests per size."),
    pg_url: str = typer.Option(
        "postgresql://postgres@127.0.0.1:5432/postgres",
        help="PostgreSQL server (a scratch database is made on it).",
    ),
) -> None:
    """p50/p95 of context assembly over loopback HTTP (and in-process) by corpus size.

    Example: cairn bench context --size 10000 --backend sqlite
    """
    from cairn.bench.context import run

    run(sizes=tuple(sizes), backends=tuple(backend), requests=requests, pg_url=pg_url)


@app.command("sdk")
def sdk(
    calls: int = typer.Option(1000, help="Calls per client and mode."),
    episodes: int = typer.Option(10_000, help="Episodes for the cairn ingest runs."),
) -> None:
    """SDK per-call latency (loopback vs in-process, vs raw httpx) and cairn ingest episodes/s.

    Example: cairn bench sdk --calls 1000 --episodes 10000
    """
    from cairn.bench.sdk import run

    run(calls=calls, episodes=episodes)


@app.command("embed")
def embed(
    queries: int = typer.Option(300, help="Distinct queries embedded one at a time (1 core)."),
    memories: int = typer.Option(1000, help="Turns compiled, then embedded in the background."),
    batch: int = typer.Option(64, help="Memories per embedding call (CAIRN_EMBED_BATCH)."),
    data: Path | None = typer.Option(
        None, "--data", help="A LoCoMo JSON file: embed its real turns instead of synthetic ones."
    ),
    as_json: bool = typer.Option(False, "--json", help="Also print the numbers as JSON."),
    matmul: str = typer.Option(
        "int8", "--matmul", help="int8 (the default) or float32: CAIRN_ONNX_MATMUL."
    ),
    embedder: str = typer.Option(
        "e5", "--embedder", help="e5 (the default), multilingual, onnx or use."
    ),
) -> None:
    """The default embedder's speed: query ms, bulk memories/s, vectors' delay.

    Query milliseconds on one core, bulk memories a second, and how long after a compile
    the vectors are written. Prints the load average: on a busy machine the numbers are
    indicative.

    Example: cairn bench embed --data ../shared/data/locomo/locomo-dev.json
    """
    import json

    from cairn.bench.embed import run

    if matmul not in ("int8", "float32"):
        raise typer.BadParameter("int8 or float32", param_hint="--matmul")
    if embedder not in ("multilingual", "e5", "onnx", "use"):
        raise typer.BadParameter("multilingual, e5, onnx or use", param_hint="--embedder")
    result = run(
        queries=queries, memories=memories, batch=batch, data=data, matmul=matmul, name=embedder
    )
    if as_json:
        typer.echo(json.dumps(result, indent=2))


@app.command("scale")
def scale(
    backend: str = typer.Option("both", "--backend", help="sqlite, postgres or both."),
    mode: str = typer.Option(
        "lexical", "--mode", help="lexical (CAIRN_EMBEDDER=none), hybrid (default embedder), both."
    ),
    sizes: list[int] = typer.Option(
        [1_000, 10_000], "--size", help="Episodes of a measured subject (repeat the option)."
    ),
    fill: int = typer.Option(
        0, "--fill", min=0, help="Episodes in other subjects of the tenant, loaded first."
    ),
    fill_subjects: int = typer.Option(100, "--fill-subjects", min=1, help="Subjects of --fill."),
    contexts: int = typer.Option(250, help="POST /v1/context calls per subject."),
    searches: int = typer.Option(200, help="Keyword searches on the largest subject."),
    pg_url: str = typer.Option(
        "postgresql://postgres@127.0.0.1:5432/postgres",
        help="PostgreSQL server (a scratch database is made on it and dropped).",
    ),
    settle: float = typer.Option(
        0.0,
        "--settle",
        min=0.0,
        help="Hybrid mode: first wait up to this many seconds for every vector to be written.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Also print the results as JSON."),
) -> None:
    """Context, search and ingest speed and server memory at scale, over HTTP.

    Context at 1k/10k-episode subjects, keyword search, batch ingest and the server's RSS,
    through a real server on loopback, measured right after the compile (hybrid mode with
    --settle: once the vectors are written).

    Example: cairn bench scale --backend both --mode both
    Larger: cairn bench scale --backend postgres --size 50000 --fill 500000
    Steady state: cairn bench scale --backend sqlite --mode hybrid --size 10000 --settle 900
    """
    from cairn.bench.scale import MODES, run

    backends = {"sqlite": ("sqlite",), "postgres": ("postgres",), "both": ("sqlite", "postgres")}
    if backend not in backends:
        raise typer.BadParameter("--backend must be sqlite, postgres or both")
    modes = tuple(MODES) if mode == "both" else (mode,)
    if any(m not in MODES for m in modes):
        raise typer.BadParameter("--mode must be lexical, hybrid or both")
    if not sizes or min(sizes) < 1:
        raise typer.BadParameter("--size takes positive episode counts")
    with _harness():  # e.g. a subject too small for its queries to find anything
        run(
            backends[backend],
            modes,
            sizes=tuple(sorted(set(sizes))),
            fill=fill,
            fill_subjects=fill_subjects,
            contexts=contexts,
            searches=searches,
            pg_url=pg_url,
            settle_s=settle,
            as_json=as_json,
            progress=_progress,
        )


@app.command("ab")
def ab(
    a: Path = typer.Option(..., "--a", help="Source tree of version A (a checkout's src)."),
    b: str = typer.Option("", "--b", help="Source tree of version B (default: this install)."),
    backend: str = typer.Option("sqlite", "--backend", help="sqlite or postgres."),
    size: int = typer.Option(10_000, "--size", min=1, help="Episodes of the subject."),
    calls: int = typer.Option(600, "--calls", min=1, help="Requests of each kind, each side."),
    kind: str = typer.Option("both", "--kind", help="context, search or both."),
    pg_url: str = typer.Option(
        "postgresql://postgres@127.0.0.1:5432/postgres",
        help="PostgreSQL server (a scratch database is made on it for each side and dropped).",
    ),
    keyed: bool = typer.Option(
        False, "--keyed", help="Every request with an API key (default: open mode)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Also print the results as JSON."),
) -> None:
    """Two versions of Cairn side by side, requests alternating between them.

    Each server (lexical, loopback) loads the same subject with its own code, then every
    request goes to both in alternating order, so a machine whose speed drifts weighs on
    both alike.

    Example: git worktree add /tmp/before HEAD~3 && cairn bench ab --a /tmp/before/src
    """
    import json

    from cairn.bench.ab import KINDS, markdown, run

    if backend not in ("sqlite", "postgres"):
        raise typer.BadParameter("--backend must be sqlite or postgres")
    kinds = KINDS if kind == "both" else (kind,)
    if any(k not in KINDS for k in kinds):
        raise typer.BadParameter("--kind must be context, search or both")
    for name, source in (("--a", str(a)), ("--b", b)):
        if source and not (Path(source) / "cairn" / "__init__.py").is_file():
            raise typer.BadParameter(f"{name} must be a source tree holding the cairn package")
    with _harness():
        result = run(
            str(a),
            b,
            backend=backend,
            size=size,
            calls=calls,
            kinds=kinds,
            pg_url=pg_url,
            keyed=keyed,
            progress=_progress,
        )
    typer.echo(markdown(result))
    if as_json:
        typer.echo(json.dumps(result, indent=2))
