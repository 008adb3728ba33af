"""What a request runs on, built from the app's ``Services``: the ladder runtime and Cairn's
own Assembly for a tenant. The API and the inspector share them, so a page runs exactly what the
matching route runs."""

from __future__ import annotations

from fastapi import Request

from cairn.engine.context import AssemblySettings, CairnAssembly
from cairn.http.auth import services_of
from cairn.ladders.runtime import LadderRuntime
from cairn.services import Services


def assembly_for(services: Services, tenant: str) -> CairnAssembly:
    """Cairn's own Assembly for one tenant, with the server's tokenizer, embedder and
    search caches."""
    return CairnAssembly(
        services.store,
        tenant,
        settings=AssemblySettings(tokenizer=services.settings.tokenizer),
        tokenizer=services.tokenizer,
        listeners=services.ingest_listeners,
        embedder=services.embedder,
        turn_listeners=services.turn_listeners,
        search_caches=services.search_caches,
        metrics=services.metrics,
    )


def ladder_runtime(request: Request) -> LadderRuntime:
    """The app's one ladder runtime (its run log and idempotency), owned by ``Services``."""
    return services_of(request).ladder_runtime
