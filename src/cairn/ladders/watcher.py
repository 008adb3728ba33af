"""Watching the ladders directory: a changed, added or removed file is reloaded within a
second, without restarting the server.

A background thread polls the directory (every ``CAIRN_LADDERS_POLL_S``, 0.25 s by default):
it compares the size and modification time of every YAML file in it and below it (scripted
replies and settings files live beside or under the ladders) and calls
``LadderRegistry.reload`` when anything changed. Polling a handful of files costs less than a
file-system notification library and behaves the same on every platform and file system.
The composition root (``Services``) starts it with the app and stops it on shutdown.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from cairn.ladders.registry import LadderRegistry

log = logging.getLogger("cairn.ladders")
Signature = tuple[tuple[str, int, int], ...]


def directory_signature(directory: Path) -> Signature:
    """Name, size and modification time of every ``*.yaml``/``*.yml`` under ``directory``."""
    out: list[tuple[str, int, int]] = []
    try:
        for path in directory.rglob("*"):
            if path.suffix not in (".yaml", ".yml"):
                continue
            try:
                st = path.stat()
            except OSError:
                continue  # removed while we looked: the next poll sees it gone
            out.append((str(path.relative_to(directory)), st.st_size, st.st_mtime_ns))
    except OSError:
        return ()
    return tuple(sorted(out))


class LadderWatcher:
    """Reloads ``registry`` when its directory changes; ``start`` and ``stop`` are idempotent."""

    def __init__(self, registry: LadderRegistry, interval_s: float = 0.25) -> None:
        self.registry = registry
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is not None or self.registry.directory is None:
            return
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._run,
            args=(directory_signature(self.registry.directory),),
            name="cairn-ladder-watcher",
            daemon=True,
        )
        self._thread.start()

    def stop(self) -> None:
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._stop.set()
        thread.join(timeout=10)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _run(self, seen: Signature) -> None:
        directory = self.registry.directory
        assert directory is not None
        while not self._stop.wait(self.interval_s):
            current = directory_signature(directory)
            if current == seen:
                continue
            seen = current
            try:
                self.registry.reload()
            except Exception:  # the watcher must outlive one bad reload
                log.exception("reloading the ladders directory failed")


__all__ = ["LadderWatcher", "directory_signature"]
