"""The composition root: every long-lived part of a Cairn process, built once from Settings.

The HTTP app, the web inspector, the CLI, the MCP server and the worker all start from a
``Services``; nothing else reads the environment. Every part is built in the constructor and
set once, as a typed attribute; parts that are slow to load (the embedding model) load on
first use inside the part. ``close`` stops every thread a part started and releases what the
parts hold, then closes the store: no module keeps a cache, a pool or a thread of its own.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from cairn.config import Settings
from cairn.core.scope import Scope
from cairn.core.tenants import DEFAULT_TENANT
from cairn.core.tokens import CountingTokenizer, get_tokenizer
from cairn.engine.backfill import EmbeddingBackfill
from cairn.engine.compile import Compiler, CompileResult, compile_scope
from cairn.engine.embedders import Embedder, LazyEmbedder, check_embedder_settings
from cairn.engine.erasure_watch import ErasureWatch
from cairn.engine.ingest import IngestListener
from cairn.engine.llm_compiler import LLMCompiler
from cairn.engine.retention import RetentionClock
from cairn.engine.search_caches import SearchCaches
from cairn.engine.worker import CompileWorker, JobRunner, ScopeCompiler
from cairn.engine.yielding import RequestGate
from cairn.ladders.registry import LadderRegistry
from cairn.ladders.runtime import LadderRuntime
from cairn.ladders.watcher import LadderWatcher
from cairn.metrics import Metrics
from cairn.slates.service import Slates
from cairn.store import Store, open_store
from cairn.templates import TemplateCatalogue, load_catalogue
from cairn.tracing import Tracing

log = logging.getLogger("cairn")


class Services:
    """What a process needs: settings, the store, and each feature's long-lived parts."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        *,
        embedder: Embedder | None = None,
        register_key: bool = True,
    ) -> None:
        """``embedder`` replaces the one the settings name (tests, an application's own
        model); the caller keeps it and closes it. ``register_key``: store ``CAIRN_API_KEY``
        as a key of the tenant ``default`` (a server's start); an in-process client (the
        SDK's ``Cairn.local``, the CLI's data commands) passes False: there the setting is
        the key it *sends*, and an unknown one must be refused, not made valid."""
        self.settings = settings
        self.store = store
        self._closed = False
        # Prometheus metrics of this process; the compile queue is read from the database.
        # Spans too, when CAIRN_OTEL is set (OpenTelemetry is not imported otherwise).
        self.metrics = Metrics(
            queue=store.queue_stats, tracing=Tracing.from_environment(settings.otel)
        )
        self._auth_required = False
        # CAIRN_API_KEY makes keys required where it is registered; not registered (an
        # in-process client sends it), the stored keys alone decide, as over HTTP.
        self._configured_key_counts = bool(settings.api_key) and register_key
        self._auth_checked_at = float("-inf")
        self._auth_generation = -1
        self._auth_lock = threading.Lock()  # worker threads refresh the answer concurrently
        # Bundled + CAIRN_TEMPLATE_DIRS; a bad file raises ConfigError: the server will not start.
        self.templates: TemplateCatalogue = load_catalogue(settings.resolved_template_dirs())
        # Token counts of context items are remembered here (the encoding itself is shared).
        self.tokenizer = CountingTokenizer(get_tokenizer(settings.tokenizer))
        # Called with (tenant, scopes) after new episodes are stored.
        self.ingest_listeners: list[IngestListener] = []
        # Called with (tenant, scopes) after committed turns (TurnSink) are stored, besides
        # the ingest listeners: by default the background compile of turns.
        self.turn_listeners: list[IngestListener] = []
        # Run when the server starts and stops (background workers, watchers); ``close``
        # stops them all in any case.
        self.on_start: list[Callable[[], None]] = []
        self.on_stop: list[Callable[[], None]] = []
        # The requests in flight (counted by the HTTP middleware): background compiles and,
        # when configured, the embedding pass step aside for them.
        self.requests = RequestGate()
        self._build_search(settings, embedder)
        self._build_compile(settings)
        # Slates (working memory), declared by the ladder files as the registry loads them.
        self.slates = Slates(store, tokenizer=settings.tokenizer, metrics=self.metrics)
        # Ladders (steps, hooks, model providers) from ladders_dir: valid files serve, invalid
        # ones are reported; the watcher reloads a changed directory while the server runs.
        self.ladders = LadderRegistry.load(settings, services=self)
        self.ladder_watcher: LadderWatcher | None = None
        if settings.ladders_dir is not None and settings.ladders_poll_s > 0:
            self.ladder_watcher = LadderWatcher(self.ladders, settings.ladders_poll_s)
            self.on_start.append(self.ladder_watcher.start)
            self.on_stop.append(self.ladder_watcher.stop)
        self.ladder_runtime = LadderRuntime(self, metrics=self.metrics)
        if self._configured_key_counts:
            store.keys.ensure_key(DEFAULT_TENANT, settings.api_key)
        store.keys.ensure_tenant(DEFAULT_TENANT)

    def _build_search(self, settings: Settings, embedder: Embedder | None) -> None:
        """Search caches, the embedder (None: lexical only; the configured one loads on first
        use) and the background pass that writes memories' vectors after a compile, so no
        request waits for the model (this process's compiles notify it; a sweep finds the
        rest)."""
        requests = self.requests
        self._own_embedder: LazyEmbedder | None = None
        if embedder is None and settings.embedder != "none":
            check_embedder_settings(settings)
            embedder = self._own_embedder = LazyEmbedder(settings)
        self.embedder: Embedder | None = embedder
        self.embedding_backfill: EmbeddingBackfill | None = None
        if embedder is not None:
            self.embedding_backfill = EmbeddingBackfill(
                self.store,
                embedder,
                batch=settings.embed_batch,
                gate=requests if settings.embed_yield else None,
            )
            self.on_start.append(self.embedding_backfill.start)
            self.on_stop.append(self.embedding_backfill.stop)
        # A search that finds memories without a vector moves their partition to the front
        # of the background pass.
        self.search_caches = SearchCaches(
            max_vector_bytes=settings.vector_cache_mb * 1_000_000,
            requests=requests,
            on_missing_vectors=self.embedding_backfill.prefer if self.embedding_backfill else None,
        )
        self.search_caches.on_erase.append(self.tokenizer.forget)
        # Erasures by other processes on the database: this one drops its caches of them.
        self.erasure_watch = ErasureWatch(self.store, self.search_caches)
        self.on_start.append(self.erasure_watch.start)
        self.on_stop.append(self.erasure_watch.stop)

    def _build_compile(self, settings: Settings) -> None:
        """The compiler (None: the heuristic default), the job runner, the in-process worker
        (on by default with SQLite), the background compile of committed turns and
        compile-on-ingest, as the settings say."""
        self.compiler: Compiler | None = None
        self._llm_compiler: LLMCompiler | None = None
        if settings.compiler == "llm":
            self.compiler = self._llm_compiler = LLMCompiler.from_settings(settings)
        self.job_runner = JobRunner(
            self.store, self.compile_step, self.metrics, settings.job_lease_seconds
        )
        in_process = settings.worker_in_process
        if in_process is None:
            in_process = self.store.single_writer
        self.compile_worker: CompileWorker | None = None
        if in_process:
            retention = RetentionClock(settings.retention_interval_s)
            self.compile_worker = CompileWorker(self.job_runner, retention, gate=self.requests)
            self.on_start.append(self.compile_worker.start)
            self.on_stop.append(self.compile_worker.stop)
        self.turn_compiler: ScopeCompiler | None = None
        if settings.compile_turns and not settings.compile_on_ingest:
            self.turn_compiler = ScopeCompiler(self.compile_step, gate=self.requests)
            self.turn_listeners.append(self.turn_compiler.submit)
            self.on_stop.append(self.turn_compiler.stop)
        if settings.compile_on_ingest:
            self.ingest_listeners.append(self._compile_after_ingest)

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        migrate: bool = True,
        embedder: Embedder | None = None,
        register_key: bool = True,
    ) -> Services:
        store = open_store(
            settings.resolved_database_url(), pool_size=settings.db_pool_size, migrate=migrate
        )
        try:
            return cls(settings, store, embedder=embedder, register_key=register_key)
        except BaseException:  # a bad template or ladder file: nothing may stay open
            store.close()
            raise

    def compile_step(self, tenant_id: str, scope: Scope) -> CompileResult:
        """One compile step of a partition with this process's compiler; the new memories'
        vectors follow in the background. ``has_more`` tells whether episodes remain (how
        many is not counted: ``remaining_episodes`` is 1 for "some")."""
        return compile_scope(
            self.store,
            tenant_id,
            scope,
            compiler=self.compiler,
            backfill=self.embedding_backfill,
            tracing=self.metrics.tracing,
            count_remaining=False,
        )

    def _compile_after_ingest(self, tenant_id: str, scopes: list[Scope]) -> None:
        for scope in scopes:
            while self.compile_step(tenant_id, scope).has_more:
                pass

    def auth_required(self) -> bool:
        """False only while no key was ever configured or created (local development on
        loopback). Revoking every key does not reopen the server.

        Once a key exists the answer can never go back to False, so True is kept for good; a
        False is re-checked after a second, so a key made by another process (``cairn keys
        create``) closes an open server within a second without a query per request.
        """
        known = self.auth_required_known()
        if known is not None:
            return known
        keys = self.store.keys
        generation = keys.generation  # read before the query: a key made during it re-asks
        required = self._configured_key_counts or keys.any_key_exists()
        with self._auth_lock:
            # Several threads may refresh at once: a True is never undone by an answer read
            # before it, and the answer's time and generation are those of its own query.
            self._auth_required = self._auth_required or required
            if required or generation == keys.generation:
                self._auth_generation = generation
                self._auth_checked_at = time.monotonic()
            return self._auth_required

    def auth_required_known(self) -> bool | None:
        """``auth_required()`` when answering needs no query (True for good, or a False
        checked within the second with no key made here since); None when it must be asked
        again. The event loop asks this first and goes to a worker thread only on None."""
        if self._auth_required:
            return True
        if (
            time.monotonic() - self._auth_checked_at > 1.0
            or self.store.keys.generation != self._auth_generation
        ):
            return None
        return False

    def close(self) -> None:
        """Stop every thread the parts started (waiting for each), release what they hold,
        then close the store. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        if self.ladder_watcher is not None:
            self.ladder_watcher.stop()
        self.ladders.close()
        # Producers first (they feed the embedding pass), then what they feed.
        if self.compile_worker is not None:
            self.compile_worker.stop()
        if self.turn_compiler is not None:
            self.turn_compiler.stop()
        if self.embedding_backfill is not None:
            self.embedding_backfill.stop()
        self.erasure_watch.stop()
        self.search_caches.close()
        if self._own_embedder is not None:
            self._own_embedder.close()
        if self._llm_compiler is not None:
            self._llm_compiler.close()
        self.store.close()
        self.metrics.tracing.shutdown()
