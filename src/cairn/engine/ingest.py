"""Ingest: append episodes, idempotently, and tell whoever listens that a scope has new input."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from cairn.core.episodes import Episode, NewEpisode
from cairn.core.scope import Scope
from cairn.store import Store

# Called after episodes of a scope are stored (e.g. compile-on-ingest). Set by Services.
IngestListener = Callable[[str, list[Scope]], None]


def record_episodes(
    store: Store,
    tenant_id: str,
    items: Sequence[NewEpisode],
    listeners: Sequence[IngestListener] = (),
) -> tuple[list[Episode], int]:
    """Store ``items`` all or nothing; returns the episodes (originals for repeated keys)
    in input order and how many were new."""
    episodes, created = store.episodes.append_many(tenant_id, items)
    if created and listeners:
        scopes = list(dict.fromkeys(ep.scope for ep in episodes))
        for listener in listeners:
            listener(tenant_id, scopes)
    return episodes, created


def record_episode(
    store: Store, tenant_id: str, item: NewEpisode, listeners: Sequence[IngestListener] = ()
) -> tuple[Episode, bool]:
    """Store one episode; returns it and whether it is new (a repeated ``idempotency_key``
    returns the original). The one ingest of a template application, for every caller."""
    episodes, created = record_episodes(store, tenant_id, [item], listeners)
    return episodes[0], created == 1
