"""Optional OpenTelemetry tracing (the ``cairn[otel]`` extra), off unless ``CAIRN_OTEL`` is set.

``Tracing`` is built once by the composition root (it travels with ``Metrics``). Off, it imports
nothing of OpenTelemetry and every ``span`` is a shared no-op. On, it makes a tracer provider of
its own (never the process-wide one, so a library user's set-up is left alone) whose exporter and
service name come from the standard ``OTEL_*`` variables:

- ``OTEL_TRACES_EXPORTER``: ``otlp`` (default; needs ``opentelemetry-exporter-otlp-proto-http``,
  which the extra installs), ``console`` or ``none``;
- ``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, ``..._HEADERS``:
  read by the OTLP exporter itself;
- ``OTEL_SERVICE_NAME`` (default ``cairn``), ``OTEL_RESOURCE_ATTRIBUTES``;
- ``OTEL_TRACES_SAMPLER`` / ``OTEL_TRACES_SAMPLER_ARG``: read by the SDK.

Spans: one per HTTP request (server kind, named ``METHOD /route/{template}``), one per lane of
context assembly (``cairn.context.<lane>``) and one per compile step (``cairn.compile.step``);
spans opened while a request runs are its children (the context travels into the threadpool).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from cairn.errors import ConfigError

log = logging.getLogger("cairn")

_NOOP: AbstractContextManager[None] = nullcontext()
INSTALL_HINT = "pip install 'cairn[otel]'"


class Tracing:
    """Spans of one process; ``Tracing()`` (off) costs one attribute check per span."""

    def __init__(self, provider: Any = None) -> None:
        # ``provider``: an OpenTelemetry SDK TracerProvider (tests pass one with an in-memory
        # exporter); None keeps tracing off.
        self.provider = provider
        self._tracer = provider.get_tracer("cairn") if provider is not None else None

    @property
    def enabled(self) -> bool:
        return self._tracer is not None

    @classmethod
    def from_environment(cls, enabled: bool) -> Tracing:
        """Off unless ``enabled`` (``CAIRN_OTEL``); on, exporter and resource from ``OTEL_*``."""
        if not enabled:
            return cls()
        try:
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
        except ImportError as exc:
            raise ConfigError(f"CAIRN_OTEL needs the otel extra: {INSTALL_HINT}") from exc
        resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", "cairn")})
        provider = TracerProvider(resource=resource)
        exporter_name = os.environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower()
        if exporter_name == "console":
            provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
        elif exporter_name == "otlp":
            try:
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            except ImportError as exc:
                raise ConfigError(
                    f"OTEL_TRACES_EXPORTER=otlp needs the OTLP exporter: {INSTALL_HINT}"
                ) from exc
            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        elif exporter_name != "none":
            raise ConfigError(
                f"OTEL_TRACES_EXPORTER={exporter_name!r} is not supported: use otlp, console "
                "or none"
            )
        return cls(provider)

    def span(
        self, name: str, attributes: Mapping[str, Any] | None = None
    ) -> AbstractContextManager[Any]:
        """A span (child of the current one), or a no-op when tracing is off."""
        if self._tracer is None:
            return _NOOP
        return self._tracer.start_as_current_span(name, attributes=attributes)

    @contextmanager
    def request_span(self, method: str) -> Iterator[Any]:
        """The server span of one HTTP request (None when off); the caller names it once the
        route is known (see ``finish_request``)."""
        if self._tracer is None:
            yield None
            return
        from opentelemetry.trace import SpanKind

        with self._tracer.start_as_current_span(
            f"{method} <unmatched>",
            kind=SpanKind.SERVER,
            attributes={"http.request.method": method},
        ) as span:
            yield span

    @staticmethod
    def finish_request(
        span: Any, method: str, route: str, path: str, status: int, tenant: str
    ) -> None:
        """Name the request's span after its route template and record the outcome."""
        if span is None:
            return
        from opentelemetry.trace import Status, StatusCode

        span.update_name(f"{method} {route}")
        span.set_attribute("http.route", route)
        span.set_attribute("url.path", path)
        span.set_attribute("http.response.status_code", status)
        span.set_attribute("cairn.tenant", tenant)
        if status >= 500:
            span.set_status(Status(StatusCode.ERROR))

    def shutdown(self) -> None:
        """Flush and stop the exporter (at process end)."""
        if self.provider is not None:
            try:
                self.provider.shutdown()
            except Exception:  # an unreachable collector must not fail the shutdown
                log.exception("could not flush the trace exporter")


__all__ = ["INSTALL_HINT", "Tracing"]
