"""Prometheus metrics of one Cairn process, correct across processes.

``Metrics`` is built once by the composition root (``Services``) and owns its registry. The
counters and histograms live there; figures that the database knows for every process at once
(the compile queue) are read at scrape time by a collector, so any process reports the same.

Several server processes (``cairn serve --workers N``, or any process manager) share their
counts through prometheus-client's multiprocess mode: when ``PROMETHEUS_MULTIPROC_DIR`` names a
directory, every process writes its values there and a scrape of any process sums them all.
``cairn serve --workers N`` sets that up by itself.

``Metrics`` also carries the process's ``Tracing`` (OpenTelemetry spans, off unless configured),
so the parts that time an event (``lane``, ``step``) record both with one object handed to them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from cairn.store.stats import QueueStats
from cairn.tracing import Tracing

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
_LATENCY = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
_LAG = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)


class QueueCollector(Collector):
    """The compile queue's depth and age, read from the database at each scrape."""

    def __init__(self, read: Callable[[], QueueStats]) -> None:
        self._read = read

    def collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            stats = self._read()
        except Exception:  # a scrape must not fail because the database is down
            return
        depth = GaugeMetricFamily(
            "cairn_compile_jobs", "Compile jobs by status (queued, running).", labels=["status"]
        )
        depth.add_metric(["queued"], stats.queued)
        depth.add_metric(["running"], stats.running)
        yield depth
        age = GaugeMetricFamily(
            "cairn_compile_job_oldest_age_seconds",
            "Age of the oldest queued job (since enqueued) and running job (since started).",
            labels=["status"],
        )
        age.add_metric(["queued"], stats.oldest_queued_s)
        age.add_metric(["running"], stats.oldest_running_s)
        yield age


class Metrics:
    """The process's metrics: HTTP, ingest, compile, context, slates and ladders."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(
        self, queue: Callable[[], QueueStats] | None = None, tracing: Tracing | None = None
    ) -> None:
        self.registry = CollectorRegistry()
        self.tracing = tracing or Tracing()
        self._queue = QueueCollector(queue) if queue is not None else None
        r = self.registry
        self.requests = Counter(
            "cairn_http_requests_total", "HTTP requests.", ["method", "route", "status"], registry=r
        )
        self.latency = Histogram(
            "cairn_http_request_duration_seconds",
            "HTTP request latency.",
            ["method", "route"],
            buckets=_LATENCY,
            registry=r,
        )
        self.episodes_ingested = Counter(
            "cairn_episodes_ingested_total", "Episodes stored (duplicates not counted).", registry=r
        )
        self.memories_compiled = Counter(
            "cairn_memories_compiled_total", "Memories created by compiles.", registry=r
        )
        self.compile_jobs = Counter(
            "cairn_compile_jobs_total",
            "Compile jobs finished, by outcome.",
            ["outcome"],
            registry=r,
        )
        self.compile_lag = Histogram(
            "cairn_compile_job_lag_seconds",
            "Time from a compile job's enqueue to its end.",
            buckets=_LAG,
            registry=r,
        )
        self.context_lane = Histogram(
            "cairn_context_lane_duration_seconds",
            "Time spent in each lane of context assembly.",
            ["lane"],
            buckets=_LATENCY,
            registry=r,
        )
        self.slate_evictions = Counter(
            "cairn_slate_evictions_total",
            "Slate entries evicted, by policy.",
            ["policy"],
            registry=r,
        )
        # Slate writes of ladder runs: written, skipped (nothing to write) or refused.
        self.slate_writes = Counter(
            "cairn_slate_writes_total",
            "Slate writes of ladder runs, by outcome and reason.",
            ["ladder", "outcome", "reason"],
            registry=r,
        )
        self.ladder_runs = Counter(
            "cairn_ladder_runs_total", "Ladder runs, by outcome.", ["outcome"], registry=r
        )

    @contextmanager
    def lane(self, name: str) -> Iterator[None]:
        """Time one lane of context assembly (histogram by lane, and a span when tracing)."""
        started = time.perf_counter()
        try:
            with self.tracing.span(f"cairn.context.{name}"):
                yield
        finally:
            self.context_lane.labels(name).observe(time.perf_counter() - started)

    def count_evictions(self, policy: str, evicted: int) -> None:
        """Count slate entries evicted (after their transaction committed)."""
        if evicted:
            self.slate_evictions.labels(policy).inc(evicted)

    def count_writes(self, ladder: str, writes: list[dict[str, Any]]) -> None:
        """Count a ladder run's slate-write outcomes (as returned with the response)."""
        for w in writes:
            self.slate_writes.labels(ladder, w["outcome"], w.get("reason") or "").inc()

    def exposition(self) -> bytes:
        """The text a scrape returns: this process's values, or every process's when shared."""
        directory = os.environ.get(MULTIPROC_ENV)
        if directory and os.path.isdir(directory):
            registry = CollectorRegistry()
            MultiProcessCollector(registry, path=directory)
        else:
            registry = self.registry
        out = generate_latest(registry)
        if self._queue is not None:
            queue_only = CollectorRegistry()
            queue_only.register(self._queue)
            out += generate_latest(queue_only)
        return out
