"""``cairn worker``: run a compile worker (and the background embedding pass) until
interrupted."""

from __future__ import annotations

import logging
import signal
import threading

import typer

from cairn.cli._common import err_console, fail, settings_with
from cairn.logs import configure_logging

log = logging.getLogger("cairn.worker")


def worker(
    database_url: str | None = typer.Option(None, "--database-url", help="CAIRN_DATABASE_URL."),
    poll: float = typer.Option(0.5, "--poll", min=0.05, help="Seconds between polls when idle."),
    once: bool = typer.Option(False, "--once", help="Drain the queue, then exit."),
) -> None:
    """Run queued compile jobs and write the vectors memories lack.

    Any number of workers may share a database: each job is claimed by one. Vectors are
    written unless CAIRN_EMBEDDER=none.

    Example: cairn worker --database-url postgresql://localhost/cairn
    """
    from cairn.engine.retention import RetentionClock, sweep_retention
    from cairn.engine.worker import CompileWorker
    from cairn.services import Services

    settings = settings_with(database_url=database_url)
    configure_logging(settings.log_level, json_lines=settings.log_json)
    # What the worker says goes to the log: with CAIRN_LOG_JSON=true every line of it is JSON.
    say = log.info if settings.log_json else err_console.print
    try:
        services = Services.from_settings(settings)
    except Exception as exc:
        raise fail(exc) from exc
    try:
        if once:
            swept = sweep_retention(services.store)
            if swept.episodes_deleted or swept.memories_deleted:
                say(
                    f"retention: {swept.episodes_deleted} episode(s), "
                    f"{swept.memories_deleted} memory(ies) expired"
                )
            done = 0
            while services.job_runner.work_once():
                done += 1
            say(f"{done} job(s) run")
            backfill = services.embedding_backfill
            if backfill is not None:
                say(f"{backfill.run_until_idle()} memories embedded")
            return
        retention = RetentionClock(settings.retention_interval_s)
        w = CompileWorker(services.job_runner, retention, poll_s=poll)
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        say("compile worker running (Ctrl-C to stop)")
        w.start()
        if services.embedding_backfill is not None:
            services.embedding_backfill.start()
        services.erasure_watch.start()
        stop.wait()
        services.erasure_watch.stop()
        w.stop()
        if services.embedding_backfill is not None:
            services.embedding_backfill.stop()
    finally:
        services.close()
