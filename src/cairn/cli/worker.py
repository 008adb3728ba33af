"""``cairn worker``: run a compile worker until interrupted."""

from __future__ import annotations

import logging
import signal
import threading

import typer

from cairn.cli._common import err_console, fail, settings_with


def worker(
    database_url: str | None = typer.Option(None, "--database-url", help="CAIRN_DATABASE_URL."),
    poll: float = typer.Option(0.5, "--poll", min=0.05, help="Seconds between polls when idle."),
    once: bool = typer.Option(False, "--once", help="Drain the queue, then exit."),
) -> None:
    """Claim queued compile jobs and run them (any number of workers may share a database).

    Example: cairn worker --database-url postgresql://localhost/cairn
    """
    from cairn.engine.retention import sweep_retention
    from cairn.engine.worker import CompileWorker, work_once
    from cairn.services import Services

    settings = settings_with(database_url=database_url)
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(levelname)s %(name)s %(message)s"
    )
    try:
        services = Services.from_settings(settings)
    except Exception as exc:
        raise fail(exc) from exc
    try:
        if once:
            swept = sweep_retention(services)
            if swept.episodes_deleted or swept.memories_deleted:
                err_console.print(
                    f"retention: {swept.episodes_deleted} episode(s), "
                    f"{swept.memories_deleted} memory(ies) expired"
                )
            done = 0
            while work_once(services):
                done += 1
            err_console.print(f"{done} job(s) run")
            return
        w = CompileWorker(services, poll_s=poll)
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        err_console.print("compile worker running (Ctrl-C to stop)")
        w.start()
        stop.wait()
        w.stop()
    finally:
        services.close()
