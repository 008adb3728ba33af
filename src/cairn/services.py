"""The composition root: every long-lived part of a Cairn process, built once from Settings.

The HTTP app, the web inspector, the CLI, the MCP server and the worker all start from a
``Services``; nothing else reads the environment. Features add their parts here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cairn.config import Settings
from cairn.core.tenants import DEFAULT_TENANT
from cairn.engine.ingest import IngestListener
from cairn.metrics import Metrics
from cairn.store import Store, open_store
from cairn.store.stats import queue_stats
from cairn.templates import TemplateCatalogue, load_catalogue
from cairn.tracing import Tracing

if TYPE_CHECKING:
    from cairn.engine.backfill import EmbeddingBackfill
    from cairn.engine.worker import ScopeCompiler

log = logging.getLogger("cairn")


class Services:
    """What a process needs: settings, the store, and each feature's long-lived parts."""

    # Set by ``attach_compile``: the embedder (loaded on first use; None with
    # CAIRN_EMBEDDER=none) and the background pass that writes memories' vectors.
    embedder: Any
    embedding_backfill: EmbeddingBackfill | None

    def __init__(self, settings: Settings, store: Store) -> None:
        self.settings = settings
        self.store = store
        # Prometheus metrics of this process; the compile queue is read from the database.
        # Spans too, when CAIRN_OTEL is set (OpenTelemetry is not imported otherwise).
        self.metrics = Metrics(
            queue=lambda: queue_stats(store.db), tracing=Tracing.from_environment(settings.otel)
        )
        self._auth_required = False
        self._auth_checked_at = float("-inf")
        self._auth_generation = -1
        # Bundled + CAIRN_TEMPLATE_DIRS; a bad file raises ConfigError: the server will not start.
        self.templates: TemplateCatalogue = load_catalogue(settings.template_dirs)
        # Called with (tenant, scopes) after new episodes are stored.
        self.ingest_listeners: list[IngestListener] = []
        # Called with (tenant, scopes) after committed turns (TurnSink) are stored, besides
        # the ingest listeners: by default the background compile of turns.
        self.turn_listeners: list[IngestListener] = []
        self.turn_compiler: ScopeCompiler | None = None
        # Run when the server starts and stops (background workers, watchers).
        self.on_start: list[Callable[[], None]] = []
        self.on_stop: list[Callable[[], None]] = []
        # Compile and search: embedder (None: lexical only), compiler, worker, compile-on-ingest.
        from cairn.engine.worker import attach_compile

        attach_compile(self)
        # Slates (working memory), declared by the ladder files as the registry loads them.
        from cairn.slates.service import Slates

        self.slates = Slates(store, tokenizer=settings.tokenizer, metrics=self.metrics)
        # Ladders (steps, hooks, model providers) from ladders_dir: valid files serve, invalid
        # ones are reported; the watcher reloads a changed directory while the server runs.
        from cairn.ladders.registry import LadderRegistry
        from cairn.ladders.watcher import LadderWatcher

        self.ladders = LadderRegistry.load(settings, services=self)
        if settings.ladders_dir is not None and settings.ladders_poll_s > 0:
            watcher = LadderWatcher(self.ladders, settings.ladders_poll_s)
            self.on_start.append(watcher.start)
            self.on_stop.append(watcher.stop)
        if settings.api_key:
            store.keys.ensure_key(DEFAULT_TENANT, settings.api_key)
        store.keys.ensure_tenant(DEFAULT_TENANT)

    @classmethod
    def from_settings(cls, settings: Settings, *, migrate: bool = True) -> Services:
        store = open_store(
            settings.resolved_database_url(), pool_size=settings.db_pool_size, migrate=migrate
        )
        return cls(settings, store)

    def auth_required(self) -> bool:
        """False only while no key was ever configured or created (local development on
        loopback). Revoking every key does not reopen the server.

        Once a key exists the answer can never go back to False, so True is kept for good; a
        False is re-checked after a second, so a key made by another process (``cairn keys
        create``) closes an open server within a second without a query per request.
        """
        if self._auth_required:
            return True
        now = time.monotonic()
        keys = self.store.keys
        if now - self._auth_checked_at > 1.0 or keys.generation != self._auth_generation:
            self._auth_generation = keys.generation
            self._auth_required = bool(self.settings.api_key) or keys.any_key_exists()
            self._auth_checked_at = now
        return self._auth_required

    def close(self) -> None:
        backfill = getattr(self, "embedding_backfill", None)
        if backfill is not None:  # its thread must not outlive the store
            backfill.stop()
        if self.turn_compiler is not None:  # its thread must not outlive the store
            self.turn_compiler.stop()
        self.store.close()
        self.metrics.tracing.shutdown()
